// Greedy choice: the first index of the largest logit (ties go to the lower id,
// so the choice is a pure function of the logits).
#pragma once
#include <cstdint>

namespace trillion {

inline int32_t argmax(const float* logits, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (logits[i] > logits[best]) best = i;
  return int32_t(best);
}

}  // namespace trillion
