#include "plan/layout.hpp"

#include <set>

#include "common/error.hpp"
#include "format/hf_tensors.hpp"
#include "store/int8_source.hpp"
#include "store/manifest.hpp"

namespace trillion {
namespace {

// The tensor names plan/ tells apart (format/hf_tensors.hpp spells them).
std::string embed_tensor(const ModelConfig& cfg) { return embed_weight(cfg).name + ".weight"; }
bool is_lm_head(const std::string& name) { return name.rfind(hf_name(Weight::lm_head) + ".", 0) == 0; }

}  // namespace

ParallelMode parse_parallel_mode(const std::string& s) {
  if (s == "pipeline") return ParallelMode::pipeline;
  if (s == "expert") return ParallelMode::expert;
  throw InputError("--parallel must be pipeline or expert, not \"" + s + "\"");
}

const char* to_string(ParallelMode m) { return m == ParallelMode::pipeline ? "pipeline" : "expert"; }

bool takes_stages(ParallelMode m) { return m == ParallelMode::pipeline; }

std::vector<ParallelMode> modes_for(const ModelConfig& cfg, int ranks) {
  std::vector<ParallelMode> modes{ParallelMode::pipeline};
  if (ranks <= cfg.n_routed_experts) modes.push_back(ParallelMode::expert);
  return modes;
}

ModelSizes model_sizes(const ModelConfig& cfg, const Manifest& manifest) {
  ModelSizes s;
  s.layer_dense.assign(size_t(cfg.num_hidden_layers), 0);
  s.layer_experts.assign(size_t(cfg.num_hidden_layers), 0);
  for (const TensorInfo& t : manifest.tensors()) {
    const HfNameParts p = parse_hf_name(t.name);
    const int64_t b = int64_t(t.nbytes);
    if (p.layer >= cfg.num_hidden_layers) continue;  // MTP
    if (p.layer >= 0) {
      (p.expert >= 0 ? s.layer_experts : s.layer_dense)[size_t(p.layer)] += b;
    } else if (t.name == embed_tensor(cfg)) {
      s.embed += b;
    } else {
      s.head += b;  // the final norm, lm_head
    }
  }
  return s;
}

Layout make_layout(const ModelConfig& cfg, const ModelSizes& sizes, ParallelMode mode, int ranks,
                   const std::string& stages, int64_t head_split) {
  if (ranks < 1) throw InputError("the rank count must be at least 1");
  if (head_split < 0 || head_split >= cfg.vocab_size)
    throw InputError("--head-split " + std::to_string(head_split) + ": lm_head rows on the first stage must be in [0, " +
                     std::to_string(cfg.vocab_size) + ")");
  if (head_split > 0 && (!takes_stages(mode) || ranks < 2))
    throw InputError("--head-split needs --parallel pipeline over 2 or more ranks");
  Layout layout;
  layout.mode = mode;
  layout.ranks.resize(size_t(ranks));
  if (mode == ParallelMode::pipeline) {
    std::vector<LayerRange> st;
    if (!stages.empty()) {
      st = parse_stages(stages, cfg.num_hidden_layers, ranks);
    } else {
      std::vector<int64_t> bytes(size_t(cfg.num_hidden_layers));
      for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) bytes[size_t(l)] = sizes.layer_total(l);
      // Balance the bytes each stage holds: stages are sized by memory.
      // Time per stage also depends on which experts a step touches: --stages
      // auto (plan/predict.hpp, time_balanced_stages) balances predicted time.
      st = balance_pipeline(bytes, sizes.embed, sizes.head, ranks);
    }
    for (int r = 0; r < ranks; ++r) {
      if (r == 0 || r == ranks - 1) st[size_t(r)].head_split = head_split;
      layout.ranks[size_t(r)] = RankShare{st[size_t(r)], ExpertRange{0, cfg.n_routed_experts}};
    }
  } else {
    if (!stages.empty()) throw InputError("--stages applies to --parallel pipeline only");
    if (ranks > cfg.n_routed_experts)
      throw InputError("expert mode needs at most one rank per routed expert (" +
                       std::to_string(cfg.n_routed_experts) + ")");
    for (int r = 0; r < ranks; ++r)
      layout.ranks[size_t(r)] = RankShare{LayerRange{0, cfg.num_hidden_layers, true, true},
                                          experts_of_rank(cfg.n_routed_experts, ranks, r)};
  }
  return layout;
}

bool holds_tensor(const ModelConfig& cfg, const RankShare& share, const std::string& name) {
  const HfNameParts p = parse_hf_name(name);
  if (p.layer >= cfg.num_hidden_layers) return false;  // MTP: never run
  if (p.layer >= 0) return share.layers.contains(p.layer) && (p.expert < 0 || share.experts.contains(p.expert));
  if (name == embed_tensor(cfg)) return share.layers.has_embed;
  if (is_lm_head(name)) return share.layers.holds_head_rows();
  return share.layers.has_head;
}

int64_t share_bytes(const ModelConfig& cfg, const Manifest& manifest, const RankShare& share) {
  int64_t b = 0;
  // A split head maps the whole file but touches only its rows' pages.
  const int64_t rows = share.layers.head_end(cfg.vocab_size) - share.layers.head_begin();
  for (const TensorInfo& t : manifest.tensors()) {
    if (!holds_tensor(cfg, share, t.name)) continue;
    b += is_lm_head(t.name) ? int64_t(t.nbytes) * rows / cfg.vocab_size : int64_t(t.nbytes);
  }
  return b;
}

namespace {
// The int8 copy (store/int8_source.hpp int8_copy_holds) of the weights `holds` accepts.
template <class Holds>
int64_t int8_copy_bytes(const Manifest& manifest, Holds holds) {
  int64_t b = 0;
  for (const TensorInfo& t : manifest.tensors())
    if (int8_copy_holds(t.name, t.dtype) && t.shape.size() == 2 && holds(t.name))
      b += int64_t(quantized_bytes(WeightFormat::int8_group, t.shape[0], t.shape[1]));
  return b;
}
}  // namespace

int64_t share_int8_copy_bytes(const ModelConfig& cfg, const Manifest& manifest, const RankShare& share) {
  return int8_copy_bytes(manifest, [&](const std::string& n) { return holds_tensor(cfg, share, n); });
}

int64_t share_mtp_int8_copy_bytes(const ModelConfig& cfg, const Manifest& manifest, const RankShare& share) {
  return int8_copy_bytes(manifest, [&](const std::string& n) { return holds_mtp_tensor(cfg, share, n); });
}

bool has_mtp_layer(const ModelConfig& cfg, const Manifest& manifest) {
  const std::string eh = hf_name(Weight::mtp_eh_proj, cfg.num_hidden_layers) + ".weight";
  for (const TensorInfo& t : manifest.tensors())
    if (t.name == eh) return true;
  return false;
}

bool holds_mtp_tensor(const ModelConfig& cfg, const RankShare& share, const std::string& name) {
  if (!share.layers.has_head || cfg.num_nextn_predict_layers < 1) return false;
  // shared_head.head is a copy of lm_head, which the rank holds already.
  const std::string copy_of_head = hf_name(Weight::mtp_head, cfg.num_hidden_layers) + ".";
  return parse_hf_name(name).layer == cfg.num_hidden_layers && name.rfind(copy_of_head, 0) != 0;
}

int64_t share_mtp_bytes(const ModelConfig& cfg, const Manifest& manifest, const RankShare& share) {
  int64_t b = 0;
  for (const TensorInfo& t : manifest.tensors())
    if (holds_mtp_tensor(cfg, share, t.name)) b += int64_t(t.nbytes);
  return b;
}

std::vector<std::string> share_mtp_files(const ModelConfig& cfg, const Manifest& manifest, const RankShare& share) {
  std::set<std::string> files;
  for (const TensorInfo& t : manifest.tensors())
    if (holds_mtp_tensor(cfg, share, t.name)) files.insert(t.shard);
  return {files.begin(), files.end()};
}

std::vector<std::string> share_files(const ModelConfig& cfg, const Manifest& manifest, const RankShare& share) {
  std::set<std::string> files;
  for (const TensorInfo& t : manifest.tensors())
    if (holds_tensor(cfg, share, t.name)) files.insert(t.shard);
  return {files.begin(), files.end()};
}

}  // namespace trillion
