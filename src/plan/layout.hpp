// Who holds what: the parallel layout of a run, a pure function of the model
// (config + manifest sizes), the rank count and the mode. Global layer and
// expert indices survive it; `trillion plan` prints it and the runtime uses it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "config/model_config.hpp"
#include "config/layer_range.hpp"
#include "plan/partition.hpp"

namespace trillion {

class Manifest;

enum class ParallelMode { pipeline, expert };
ParallelMode parse_parallel_mode(const std::string& s);  // throws InputError
const char* to_string(ParallelMode m);
// Whether the mode splits the layers into stages, so that --stages and
// --head-split apply to it.
bool takes_stages(ParallelMode m);
// The modes a job of `ranks` can run the model in (expert parallel: at most
// one rank per routed expert), for `trillion plan`'s predictions.
std::vector<ParallelMode> modes_for(const ModelConfig& cfg, int ranks);

// Bytes of the weights by part, from the manifest (main layers only; MTP excluded).
struct ModelSizes {
  int64_t embed = 0;                     // model.embed_tokens
  int64_t head = 0;                      // model.norm + lm_head
  std::vector<int64_t> layer_dense;      // [L] every tensor of the layer but its routed experts
  std::vector<int64_t> layer_experts;    // [L] all routed experts of the layer
  int64_t layer_total(int64_t l) const { return layer_dense[size_t(l)] + layer_experts[size_t(l)]; }
};
ModelSizes model_sizes(const ModelConfig& cfg, const Manifest& manifest);

struct RankShare {
  LayerRange layers;     // pipeline: its stage; expert: every layer
  ExpertRange experts;   // routed experts held in each MoE layer of `layers`
};

struct Layout {
  ParallelMode mode = ParallelMode::pipeline;
  std::vector<RankShare> ranks;
  int size() const { return int(ranks.size()); }
};

// `stages` ("0-14,15-30,...") overrides the byte-balanced pipeline split;
// `head_split` > 0 splits lm_head's rows between the first and last stage
// (LayerRange::head_split; pipeline over 2 or more ranks only).
Layout make_layout(const ModelConfig& cfg, const ModelSizes& sizes, ParallelMode mode, int ranks,
                   const std::string& stages = "", int64_t head_split = 0);

// Whether rank's share includes a tensor (by HF name). MTP tensors: never.
bool holds_tensor(const ModelConfig& cfg, const RankShare& share, const std::string& name);

// Weight bytes a rank maps, and the shard files it needs.
int64_t share_bytes(const ModelConfig& cfg, const Manifest& manifest, const RankShare& share);
// Memory the integer-dot path allocates for an FP8 share: its FP8 linear
// weights requantized to int8 groups (store/int8_source.hpp). The mapped FP8
// pages stay file-backed (reclaimable); this copy is anonymous memory.
int64_t share_int8_copy_bytes(const ModelConfig& cfg, const Manifest& manifest, const RankShare& share);
// MTP speculative decoding (generate --speculative mtp): the MTP layer
// (model.layers.{num_hidden_layers}.*) lives where the head does, on every
// rank that holds lm_head (the last pipeline stage; every expert-parallel
// rank, with all of its routed experts). Whether the converted model holds
// it, and the bytes a rank maps for it: every MTP tensor but shared_head.head
// (a copy of lm_head, which the rank holds already).
bool has_mtp_layer(const ModelConfig& cfg, const Manifest& manifest);
bool holds_mtp_tensor(const ModelConfig& cfg, const RankShare& share, const std::string& name);
int64_t share_mtp_bytes(const ModelConfig& cfg, const Manifest& manifest, const RankShare& share);
// The int8 copy (share_int8_copy_bytes) of the MTP layer's FP8 linears.
int64_t share_mtp_int8_copy_bytes(const ModelConfig& cfg, const Manifest& manifest, const RankShare& share);
std::vector<std::string> share_mtp_files(const ModelConfig& cfg, const Manifest& manifest, const RankShare& share);

std::vector<std::string> share_files(const ModelConfig& cfg, const Manifest& manifest, const RankShare& share);

}  // namespace trillion
