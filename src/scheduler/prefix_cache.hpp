// Shared prefixes, the coordinator's side: which KV-cache blocks are kept
// after their sequence moves on, under which id, for which tokens; the ops
// (model/batch.hpp KvPrefixOp) that make every rank's KvCache do the same.
//
// Token-granular, like SGLang's radix cache rather than vLLM's whole-block
// matching (HellaSwag's contexts are shorter than a block, so whole blocks
// would share almost nothing): a kept block is identified by its parent
// block and its own tokens (1 to 64 of them; a partial block is the end of
// a sequence), so by every token before it, and is matched by exact token
// comparison (no hash is trusted). A new sequence that matches m tokens
// reads the blocks wholly before the position it starts computing at and
// copies the first rows of the block that position falls in (a shared block
// is read-only). A block's keys and values depend only on the tokens up to
// it and their positions (docs/determinism.md), so it reads the same bits it
// would have computed: results are identical with sharing on or off.
//
// A kept block is pinned while a running sequence reads or produced it;
// unpinned blocks without kept children are evicted least recently used
// first when a new sequence needs room. Every decision is a function of the
// requests and the order the scheduler meets them, never of timing, so every
// run (and every rank) agrees.
#pragma once
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "model/batch.hpp"
#include "model/kv_pools.hpp"

namespace trillion {

class PrefixCache {
 public:
  static constexpr int32_t kNone = -1;

  PrefixCache(const KvPools& pools, KvLedger& ledger);
  int32_t block_tokens() const { return block_tokens_; }

  struct Match {
    std::vector<int32_t> chain;  // kept full blocks equal to the sequence's first blocks, in order
    int32_t tail = kNone;        // the kept block sharing the most tokens of the next block
    int32_t tail_tokens = 0;     // how many
    int64_t tokens(int32_t block_tokens) const { return int64_t(chain.size()) * block_tokens + tail_tokens; }
  };
  // The longest match of `tokens` in `pool`. Marks what it uses as used (LRU).
  Match match(int32_t pool, std::span<const int32_t> tokens);

  // How a sequence starts computing at `start` (at most the match's tokens):
  // the whole blocks below it are shared, the rows of its block below it
  // copied from `source`. `pins`: the kept blocks it reads (pin them while
  // it runs: the shared ones, and the source, whose rows a scorer reports).
  struct Plan {
    std::vector<int32_t> share;
    int32_t source = kNone;  // the kept block covering position `start` (kNone: none)
    int32_t copy_rows = 0;
    int64_t start = 0;
    std::vector<int32_t> pins;
  };
  Plan plan(const Match& m, int64_t start) const;
  // The share and copy ops giving `slot` the plan's blocks.
  static void plan_ops(int32_t slot, const Plan& p, std::vector<KvPrefixOp>& ops);

  void pin(const std::vector<int32_t>& ids);
  void unpin(const std::vector<int32_t>& ids);

  struct Kept {
    int32_t id = kNone;
    bool fresh = false;  // a new entry (else an identical block was kept already)
  };
  // Block `block` of the sequence in `slot` (its tokens `tokens`, 1 to 64 of
  // them, after the chain ending in `parent`), written by a submitted step
  // and never written again: kept under a new id (keep op appended; one
  // block of the slot's reservation moves to the cache) unless an identical
  // block is kept already. Either way the returned id is pinned for the caller.
  Kept keep(int32_t slot, int32_t parent, int32_t block, std::span<const int32_t> tokens,
            std::vector<KvPrefixOp>& ops);

  // Drops the least recently used unpinned block of `pool` that has no kept
  // children (drop op appended, its block back to the ledger's pool);
  // returns its id, or kNone when none can go.
  int32_t evict(int32_t pool, std::vector<KvPrefixOp>& ops);
  int64_t size() const { return int64_t(entries_.size()); }
  // At the end of a run (every sequence finished and unpinned): evicts every
  // kept block and checks that the ledger has every block of every pool
  // back; an Error naming `who` if not (a leak).
  void check_drained(const char* who);

 private:
  struct Entry {
    int32_t pool = 0, slot = 0, parent = kNone;
    std::vector<int32_t> tokens;
    int32_t users = 0, children = 0;
    uint64_t used = 0;  // LRU tick
  };
  using Branch = std::tuple<int32_t, int32_t, int32_t>;  // (pool, parent, first token)
  static std::string key_of(int32_t pool, int32_t parent, std::span<const int32_t> tokens);

  KvPools pools_;
  KvLedger& ledger_;
  int32_t block_tokens_;
  int32_t next_id_ = 0;
  uint64_t tick_ = 0;
  std::unordered_map<int32_t, Entry> entries_;
  std::unordered_map<std::string, int32_t> by_key_;    // exact (pool, parent, tokens) -> id
  std::map<Branch, std::vector<int32_t>> branches_;    // the kept blocks after a parent, by first token
};

}  // namespace trillion
