// One forward step of the whole model for a batch of token rows, wherever the
// layers live. The engine (scheduling, sampling, results) sees only this; the
// one-rank implementation is LocalRunner, the parallel runtime provides others.
#pragma once
#include <cstdint>
#include <vector>

#include "model/batch.hpp"

namespace trillion {

struct StepInput {
  std::vector<int32_t> tokens;     // [n] token ids, one per batch row
  Batch batch;                     // [n] (slot, pos) of each row
  std::vector<int64_t> logit_rows; // rows whose logits the caller needs, increasing
};

class StepRunner {
 public:
  virtual ~StepRunner() = default;
  virtual int64_t vocab_size() const = 0;
  virtual int32_t slots() const = 0;    // sequence slots of the KV cache
  virtual int32_t max_len() const = 0;  // positions per slot
  // logits[logit_rows.size(), vocab] for the requested rows, in their order.
  virtual void step(const StepInput& in, float* logits) = 0;
};

}  // namespace trillion
