// Which part of the model a rank runs (pipeline stages hold contiguous ranges).
#pragma once
#include <cstdint>

namespace trillion {

struct LayerRange {
  int64_t begin = 0;     // first decoder layer held
  int64_t end = 0;       // one past the last
  bool has_embed = true; // first stage: token embeddings
  bool has_head = true;  // last stage: final norm + lm_head
  int64_t size() const { return end - begin; }
  bool contains(int64_t layer) const { return layer >= begin && layer < end; }
};

}  // namespace trillion
