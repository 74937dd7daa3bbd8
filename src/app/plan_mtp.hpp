// `trillion plan`'s account of the MTP layer (generate --speculative mtp):
// its weights and its KV cache on the ranks that hold the head. Apart from
// cmd_plan.cpp so the plan command's own table stays as it is.
#pragma once
#include <cstdint>

#include <nlohmann/json.hpp>

#include "config/model_config.hpp"
#include "plan/layout.hpp"

namespace trillion {
class Manifest;
}

namespace trillion::app {

// {"weight_bytes", "kv_cache_bytes"} of the MTP layer on this rank (zeros
// where it does not live or the model has none); kv_per_layer: the bytes
// one layer's share of the rank's KV pool takes (the MTP cache has the same blocks).
nlohmann::json mtp_footprint(const ModelConfig& cfg, const Manifest& man, const RankShare& share,
                             int64_t kv_per_layer);
// One line under the plan's table, when the model has an MTP layer.
void print_mtp_footprint(const nlohmann::json& per_rank);

}  // namespace trillion::app
