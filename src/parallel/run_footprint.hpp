// What a run's shape (--max-batch, --max-len, --kv-cache-tokens,
// --step-tokens) costs one rank in memory, worked out from the config before
// anything is allocated, and the check that refuses a shape the host cannot
// hold. Without it a typo (--kv-cache-tokens 10000000000) zero-fills pages
// until the kernel kills the job, hours of nothing and no message.
//
// The weights are not counted: they are mapped from the shards and may be
// larger than memory (a model larger than RAM runs from the page cache,
// slower). The KV cache and the activations are anonymous memory: they must fit.
#pragma once
#include <cstdint>

#include "config/model_config.hpp"
#include "parallel/run_shape.hpp"

namespace trillion {

struct RunFootprint {
  double position_bytes = 0;    // KV cache per cached position over the rank's layers
  double kv_positions = 0;      // positions of the rank's pool (blocks x 64)
  double kv_bytes = 0;          // the pool: position_bytes x kv_positions
  double activation_bytes = 0;  // one step's largest buffers (step_tokens + slots rows)
};

// `layers`: decoder layers the rank holds; `pool_slots`: the slots of its pool
// (every slot, or the rank's share in expert parallel). Doubles: the products
// of absurd flags must compare, not overflow.
RunFootprint run_footprint(const ModelConfig& cfg, const RunShape& shape, int64_t layers, int32_t pool_slots);

// Throws InputError naming the flag to change and what would fit when the
// footprint exceeds `memory_bytes` (the rank's share of the host's memory).
void check_run_memory(const ModelConfig& cfg, const RunShape& shape, int64_t layers, int32_t pool_slots,
                      double memory_bytes);

// The host's physical memory (platform/process_memory.hpp); 0 when unknown.
double physical_memory_bytes();

}  // namespace trillion
