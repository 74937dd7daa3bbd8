// One forward step's token rows. A row is one token of one sequence: the
// sequence's cache slot and the token's position in it. A step may mix
// prefill rows (many positions of one slot, in increasing order) and decode
// rows (one position of a slot). Every row's result depends only on its own
// sequence's history and the weights (docs/determinism.md).
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

namespace trillion {

struct TokenRow {
  int32_t slot = 0;  // index into KvCache's sequence slots
  int32_t pos = 0;   // position of this token in its sequence (0-based)
};

struct Batch {
  Batch() = default;
  // Implicit, so Batch{{{slot, pos}, ...}} still reads as rows (and -Wextra
  // does not flag the `released` it leaves empty).
  Batch(std::vector<TokenRow> r) : rows(std::move(r)) {}  // NOLINT(google-explicit-constructor)
  std::vector<TokenRow> rows;  // [n]
  // Slots whose sequences have ended: their KV-cache blocks return to the
  // pool before this batch's rows take blocks (see KvCache::prepare).
  std::vector<int32_t> released;
  int64_t size() const { return int64_t(rows.size()); }
};

}  // namespace trillion
