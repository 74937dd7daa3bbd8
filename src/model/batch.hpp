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

// Shared prefixes (scheduler/prefix_cache.hpp): a block of a slot's cache
// kept under an id after its sequence moves on, given whole to other slots
// whose sequences start with the same tokens, or its first rows copied into
// a block of their own (a match that ends inside the block), and dropped when
// evicted. The coordinator decides; every rank holding the cache applies the
// same ops, so block tables stay identical across pipeline stages.
struct KvPrefixOp {
  enum Kind : int32_t { kKeep = 0, kShare = 1, kDrop = 2, kCopy = 3 };
  int32_t kind = kKeep;
  // keep: the slot whose block `block` is kept; share: the slot whose table
  // gets the kept block as its block `block`; copy: the slot that takes a
  // new block `block` holding the kept block's first `rows` rows; drop: the
  // slot that kept it (it names the pool, in expert parallel).
  int32_t slot = 0;
  int32_t block = 0;  // index in the slot's block table (positions 64 * block, ...)
  int32_t id = 0;     // the kept block's id, unique within its pool
  int32_t rows = 0;   // copy: rows copied
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
  // Applied by KvCache::prepare: keeps, then `released`, then drops, then
  // shares, then copies (each in list order), then the rows take blocks.
  std::vector<KvPrefixOp> prefix_ops;
  int64_t size() const { return int64_t(rows.size()); }
};

}  // namespace trillion
