// The shape of a run every rank agrees on: sequence slots, context, steps in
// flight and the KV-cache pool size. From the command line (--max-batch,
// --max-len, --micro-batches, --kv-cache-tokens, --activations).
#pragma once
#include <cstdint>

#include "model/linear.hpp"

namespace trillion {

struct RunShape {
  int32_t slots = 8;        // sequence slots
  int32_t max_len = 4096;   // positions per slot
  int micro_batches = 0;    // steps in flight (pipeline); 0: one per stage
  int64_t kv_tokens = 0;    // KV-cache pool positions per rank; 0: slots x max_len (of the rank's slots)
  int64_t step_tokens = 256;  // most rows of one step's prefill (sizes the activation rings)
  Activations activations = Activations::f32;  // compute path of the weight products (--activations)
};

}  // namespace trillion
