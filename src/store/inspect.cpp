#include "store/inspect.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "store/shard_reader.hpp"

namespace trillion {

namespace fs = std::filesystem;
using nlohmann::json;

const char* const kActiveDefinition =
    "active = what one token's forward pass multiplies: attention, norms, dense MLPs, routers, shared experts, "
    "num_experts_per_tok of n_routed_experts routed experts per MoE layer, final norm, lm_head; "
    "not the embedding table (one row is read) nor the MTP layers";

namespace {

bool is_scale(const std::string& name) {
  return name.ends_with(".weight_scale_inv") || name.ends_with(".weight_scale");
}

std::string human_bytes(uint64_t b) {
  char buf[32];
  if (b >= 1000000000ull) std::snprintf(buf, sizeof buf, "%.2f GB", double(b) / 1e9);
  else if (b >= 1000000ull) std::snprintf(buf, sizeof buf, "%.2f MB", double(b) / 1e6);
  else if (b >= 1000ull) std::snprintf(buf, sizeof buf, "%.2f kB", double(b) / 1e3);
  else std::snprintf(buf, sizeof buf, "%llu B", (unsigned long long)b);
  return buf;
}

std::string human_count(int64_t n) {
  char buf[32];
  if (n >= 1000000000) std::snprintf(buf, sizeof buf, "%.2f B", double(n) / 1e9);
  else if (n >= 1000000) std::snprintf(buf, sizeof buf, "%.2f M", double(n) / 1e6);
  else std::snprintf(buf, sizeof buf, "%lld", (long long)n);
  return buf;
}

std::string shard_description(const ShardInfo& s) {
  switch (s.role) {
    case TensorRole::embed: return "token embedding";
    case TensorRole::head: return "final norm + lm_head";
    case TensorRole::layer: return "layer " + std::to_string(s.layer);
    case TensorRole::mtp: return "MTP layer " + std::to_string(s.layer);
    case TensorRole::experts:
    case TensorRole::mtp_experts:
      return std::string(s.role == TensorRole::mtp_experts ? "MTP " : "") + "layer " + std::to_string(s.layer) +
             " experts " + std::to_string(s.expert_first) + "-" + std::to_string(s.expert_last);
  }
  return "?";
}

}  // namespace

ParameterCounts count_parameters(const Manifest& m, const ModelConfig& cfg) {
  ParameterCounts c;
  int64_t routed = 0;
  for (const TensorInfo& t : m.tensors()) {
    if (is_scale(t.name)) continue;
    int64_t n = t.numel();
    if (!t.weight_shape.empty()) n = t.weight_shape[0] * t.weight_shape[1];
    switch (m.find_shard(t.shard)->role) {
      case TensorRole::embed: c.total += n; break;
      case TensorRole::head:
      case TensorRole::layer: c.total += n; c.active += n; break;
      case TensorRole::experts: c.total += n; routed += n; break;
      case TensorRole::mtp:
      case TensorRole::mtp_experts: c.mtp += n; break;
    }
  }
  // Every MoE layer has the same experts, so k/E of all routed weights is what one token uses.
  if (cfg.n_routed_experts > 0)
    c.active += int64_t(double(routed) * double(cfg.num_experts_per_tok) / double(cfg.n_routed_experts) + 0.5);
  return c;
}

ModelSummary summarize_model(const std::string& dir) {
  ModelSummary s;
  s.store = ModelStore::open(dir, StoreOptions{false});
  const Manifest& m = s.store->manifest();
  s.params = count_parameters(m, s.store->config());
  for (const TensorInfo& t : m.tensors()) {
    s.bytes_by_dtype[dtype_name(t.dtype)] += t.nbytes;
    s.bytes_by_role[to_string(m.find_shard(t.shard)->role)] += t.nbytes;
  }
  // The error report convert --quantize wrote (optional: information only).
  if (!m.quantized_from.empty()) {
    std::ifstream f(fs::path(dir) / "quantization.json");
    if (f) {
      const json j = json::parse(f, nullptr, /*allow_exceptions=*/false);
      if (j.is_object() && j.contains("overall") && j["overall"].is_object()) s.quantization = j["overall"];
    }
  }
  for (const ShardInfo& sh : m.shards()) s.shard_problems.push_back(shard_file_problem((fs::path(dir) / sh.file).string(), sh));
  return s;
}

void print_summary(std::ostream& out, const ModelSummary& s) {
  const ModelConfig& c = s.store->config();
  const Manifest& m = s.store->manifest();
  int64_t moe = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) moe += c.is_moe_layer(l);
  char buf[512];
  out << "model " << s.store->dir() << ": " << c.model_type << ", " << to_string(m.weight_format) << " weights";
  if (!m.quantized_from.empty())
    out << " (quantized from " << m.quantized_from << " by trillion convert --quantize: every linear layer and lm_head)";
  out << "\n";
  if (!s.quantization.is_null()) {
    const json& q = s.quantization;
    std::snprintf(buf, sizeof buf, "  quantization error: relative RMS %.3e, max |error| %.3e, %.3f bits/weight "
                  "over %lld matrices (quantization.json)\n",
                  q.value("rel_rms_error", 0.0), q.value("max_abs_error", 0.0), q.value("bits_per_weight", 0.0),
                  (long long)q.value("matrices", int64_t(0)));
    out << buf;
  }
  std::snprintf(buf, sizeof buf,
                "  layers %lld (%lld dense, %lld MoE) + %lld MTP; hidden %lld, heads %lld, vocab %lld\n"
                "  MLA: q_lora_rank %s, kv_lora_rank %lld, qk %lld nope + %lld rope, v %lld\n"
                "  MoE: %lld routed experts (top %lld, %lld groups keep %lld) + %lld shared, width %lld; dense width %lld\n",
                (long long)c.num_hidden_layers, (long long)(c.num_hidden_layers - moe), (long long)moe,
                (long long)c.num_nextn_predict_layers, (long long)c.hidden_size, (long long)c.num_attention_heads,
                (long long)c.vocab_size, c.q_lora_rank ? std::to_string(*c.q_lora_rank).c_str() : "none",
                (long long)c.kv_lora_rank, (long long)c.qk_nope_head_dim, (long long)c.qk_rope_head_dim,
                (long long)c.v_head_dim, (long long)c.n_routed_experts, (long long)c.num_experts_per_tok,
                (long long)c.n_group, (long long)c.topk_group, (long long)c.n_shared_experts,
                (long long)c.moe_intermediate_size, (long long)c.intermediate_size);
  out << buf;
  out << "  context " << c.max_position_embeddings;
  if (c.rope_scaling)
    out << " (yarn x" << c.rope_scaling->factor << " of " << c.rope_scaling->original_max_position_embeddings << ")";
  out << "\nparameters: " << human_count(s.params.total) << " total, " << human_count(s.params.active)
      << " active per token";
  if (s.params.mtp) out << ", + " << human_count(s.params.mtp) << " in MTP layers";
  out << "\n  (" << kActiveDefinition << ")\n";
  out << "bytes by dtype:";
  for (const auto& [k, v] : s.bytes_by_dtype) out << "  " << k << " " << human_bytes(v);
  out << "\nbytes by role: ";
  for (const auto& [k, v] : s.bytes_by_role) out << "  " << k << " " << human_bytes(v);
  uint64_t total = 0;
  size_t bad = 0;
  for (size_t i = 0; i < m.shards().size(); ++i) {
    total += m.shards()[i].bytes;
    bad += !s.shard_problems[i].empty();
  }
  out << "\nshards: " << m.shards().size() << " files, " << human_bytes(total) << " (experts_per_shard "
      << m.experts_per_shard << ")";
  if (bad) out << ", " << bad << " with problems";
  out << "\n";
  for (size_t i = 0; i < m.shards().size(); ++i) {
    const ShardInfo& sh = m.shards()[i];
    std::snprintf(buf, sizeof buf, "  %-36s %12s  %s", sh.file.c_str(), human_bytes(sh.bytes).c_str(),
                  shard_description(sh).c_str());
    out << buf;
    if (!s.shard_problems[i].empty()) out << "  ** " << s.shard_problems[i];
    out << "\n";
  }
}

json summary_json(const ModelSummary& s) {
  const ModelConfig& c = s.store->config();
  const Manifest& m = s.store->manifest();
  json shards = json::array();
  for (size_t i = 0; i < m.shards().size(); ++i) {
    const ShardInfo& sh = m.shards()[i];
    json e = {{"file", sh.file}, {"bytes", sh.bytes}, {"role", to_string(sh.role)}, {"ok", s.shard_problems[i].empty()}};
    if (sh.layer >= 0) e["layer"] = sh.layer;
    if (sh.expert_first >= 0) e["experts"] = {sh.expert_first, sh.expert_last};
    if (!s.shard_problems[i].empty()) e["problem"] = s.shard_problems[i];
    shards.push_back(std::move(e));
  }
  return json{{"dir", s.store->dir()},
              {"model_type", c.model_type},
              {"weight_format", to_string(m.weight_format)},
              {"quantized_from", m.quantized_from.empty() ? json(nullptr) : json(m.quantized_from)},
              {"quantization", s.quantization},
              {"num_hidden_layers", c.num_hidden_layers},
              {"num_nextn_predict_layers", c.num_nextn_predict_layers},
              {"hidden_size", c.hidden_size},
              {"vocab_size", c.vocab_size},
              {"n_routed_experts", c.n_routed_experts},
              {"num_experts_per_tok", c.num_experts_per_tok},
              {"parameters",
               {{"total", s.params.total}, {"active", s.params.active}, {"mtp", s.params.mtp},
                {"active_definition", kActiveDefinition}}},
              {"bytes_by_dtype", s.bytes_by_dtype},
              {"bytes_by_role", s.bytes_by_role},
              {"tensors", m.tensors().size()},
              {"experts_per_shard", m.experts_per_shard},
              {"shards", std::move(shards)}};
}

}  // namespace trillion
