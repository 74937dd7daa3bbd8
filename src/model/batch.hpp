// One forward step's token rows. A row is one token of one sequence: the
// sequence's cache slot and the token's position in it. A step may mix
// prefill rows (many positions of one slot, in increasing order) and decode
// rows (one position of a slot). Every row's result depends only on its own
// sequence's history and the weights (DESIGN: determinism by construction).
#pragma once
#include <cstdint>
#include <vector>

namespace trillion {

struct TokenRow {
  int32_t slot = 0;  // index into KvCache's sequence slots
  int32_t pos = 0;   // position of this token in its sequence (0-based)
};

struct Batch {
  std::vector<TokenRow> rows;  // [n]
  int64_t size() const { return int64_t(rows.size()); }
};

}  // namespace trillion
