// Which part of the model a rank runs (pipeline stages hold contiguous
// ranges): plan/ decides it, model/ maps and runs it.
#pragma once
#include <cstdint>

namespace trillion {

struct LayerRange {
  int64_t begin = 0;     // first decoder layer held
  int64_t end = 0;       // one past the last
  bool has_embed = true; // first stage: token embeddings
  bool has_head = true;  // last stage: final norm + lm_head
  // A pipeline may split the head's vocabulary rows (--head-split S) so the
  // first stage takes a share of the last stage's work at finer grain than a
  // layer: the last stage multiplies lm_head rows [S, vocab) and sends the
  // final-normed rows back, and the first multiplies rows [0, S) and picks
  // the tokens. 0: no split. Both stages carry S.
  int64_t head_split = 0;
  int64_t size() const { return end - begin; }
  bool contains(int64_t layer) const { return layer >= begin && layer < end; }
  // lm_head rows [head_begin(), head_end(vocab)) are multiplied here.
  bool holds_head_rows() const { return has_head || first_head_part(); }
  bool first_head_part() const { return head_split > 0 && has_embed && !has_head; }
  int64_t head_begin() const { return has_head ? head_split : 0; }
  int64_t head_end(int64_t vocab) const { return has_head ? vocab : first_head_part() ? head_split : 0; }
};

}  // namespace trillion
