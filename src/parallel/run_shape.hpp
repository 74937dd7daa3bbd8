// The shape of a run every rank agrees on: sequence slots, context, steps in
// flight and the KV-cache pool size. From the command line (--max-batch,
// --max-len, --micro-batches, --kv-cache-tokens, --activations).
#pragma once
#include <algorithm>
#include <cstdint>

#include "config/activations.hpp"
#include "config/row_groups.hpp"

namespace trillion {

struct RunShape {
  int32_t slots = 8;        // sequence slots
  int32_t max_len = 4096;   // positions per slot
  int micro_batches = 0;    // steps in flight (pipeline; 0: one per stage), row groups (expert; 0: 2)
  int64_t kv_tokens = 0;    // KV-cache pool positions per rank; 0: slots x max_len (of the rank's slots)
  int64_t step_tokens = 256;  // most rows of one step's prefill (sizes the activation rings)
  Activations activations = Activations::f32;  // compute path of the weight products (--activations)
  bool speculative = false;  // --speculative mtp: the head's rank runs the MTP layer, decode rows come in pairs
  // Expert mode: fewest rows a row group gets (Transformer::set_groups);
  // tests lower it to split their small batches.
  int64_t min_group_rows = kMinGroupRows;

  // The most rows one step can hold: prefill tokens (at most step_tokens, and
  // never more than every slot's whole context) plus one decode row a slot (two
  // when speculative: the new token and its draft).
  // What activation buffers are sized by, whatever --step-tokens says.
  int64_t max_step_rows() const {
    return std::min<int64_t>(step_tokens, int64_t(slots) * max_len) + int64_t(slots) * (speculative ? 2 : 1);
  }
};

}  // namespace trillion
