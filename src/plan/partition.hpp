// How the model is divided between ranks: pure functions of (model sizes,
// rank count, mode). Global layer and expert indices survive partitioning.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "config/expert_range.hpp"
#include "config/layer_range.hpp"

namespace trillion {

// Pipeline: contiguous layer ranges, embeddings on the first stage, final
// norm + lm_head on the last. Chooses the split minimizing the largest
// stage's bytes (embed/head bytes included).
std::vector<LayerRange> balance_pipeline(const std::vector<int64_t>& layer_bytes, int64_t embed_bytes,
                                         int64_t head_bytes, int ranks);

// Parses "--stages 0-14,15-30,31-60" (inclusive ranges; one per rank, covering
// every layer once, in order). Throws InputError naming the problem.
std::vector<LayerRange> parse_stages(const std::string& spec, int64_t num_layers, int ranks);

// Parses "--head-split N" (lm_head rows on the first stage, LayerRange::head_split):
// a count >= 0, or "auto" / "" (-1: --stages auto's choice, else none).
// Throws InputError naming the problem.
int64_t parse_head_split(const std::string& spec);

// Expert parallel: routed experts [begin, end) held by `rank`, contiguous and
// balanced (sizes differ by at most one).
ExpertRange experts_of_rank(int64_t n_experts, int ranks, int rank);
int owner_of_expert(int64_t n_experts, int ranks, int64_t expert);

}  // namespace trillion
