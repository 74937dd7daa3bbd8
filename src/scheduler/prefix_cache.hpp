// Shared prefixes, the coordinator's side: which full KV-cache blocks are
// kept after their sequence moves on, under which id, for which tokens; the
// ops (model/batch.hpp KvPrefixOp) that make every rank's KvCache do the same.
//
// Chosen as vLLM's automatic prefix caching does: a block is identified by
// its own tokens and its parent block (so by every token before it), matched
// by exact token comparison (no hash is trusted), whole blocks only. A
// block's keys and values depend only on the tokens up to it and their
// positions (docs/determinism.md), so a sequence that starts with a kept
// chain reads the same bits it would have computed: results are identical
// with sharing on or off. A kept block is pinned while a running sequence
// uses it (or produced it); unpinned blocks without kept children are
// evicted least recently used first when a new sequence needs room.
//
// Every decision is a function of the requests and the order the scheduler
// meets them, never of timing, so every run (and every rank) agrees.
#pragma once
#include <cstdint>
#include <span>
#include <string>
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

  // The ids of the longest chain of kept blocks of `pool` that `tokens`
  // starts with, at most `max_blocks` long. Marks them used (LRU).
  std::vector<int32_t> match(int32_t pool, std::span<const int32_t> tokens, int64_t max_blocks);
  void pin(const std::vector<int32_t>& ids);
  void unpin(const std::vector<int32_t>& ids);
  // Share ops giving `slot` the chain `ids` as its first blocks (pinned by the caller).
  static void share_ops(int32_t slot, const std::vector<int32_t>& ids, std::vector<KvPrefixOp>& ops);

  struct Kept {
    int32_t id = kNone;
    bool fresh = false;  // a new entry (else an identical block was kept already)
  };
  // Block `block` of the sequence in `slot` (tokens `block_tokens`, after
  // the chain ending in `parent`), written by a submitted step: kept under a
  // new id (keep op appended; one block of the slot's reservation moves to
  // the cache) unless an identical block is kept already. Either way the
  // returned id is pinned for the caller.
  Kept keep(int32_t slot, int32_t parent, int32_t block, std::span<const int32_t> block_tokens,
            std::vector<KvPrefixOp>& ops);

  // Drops the least recently used unpinned block of `pool` that has no kept
  // children (drop op appended, its block back to the ledger's pool);
  // returns its id, or kNone when none can go.
  int32_t evict(int32_t pool, std::vector<KvPrefixOp>& ops);
  int64_t kept(int32_t pool) const;  // blocks kept in `pool`
  // At the end of a run (every sequence finished and unpinned): evicts every
  // kept block and checks that the ledger has every block of every pool
  // back; an Error naming `who` if not (a leak).
  void check_drained(const char* who);
  int64_t size() const { return int64_t(entries_.size()); }

 private:
  struct Entry {
    int32_t pool = 0, slot = 0, parent = kNone;
    std::string key;
    int32_t users = 0, children = 0;
    uint64_t used = 0;  // LRU tick
  };
  std::string key_of(int32_t pool, int32_t parent, std::span<const int32_t> tokens) const;

  KvPools pools_;
  KvLedger& ledger_;
  int32_t block_tokens_;
  int32_t next_id_ = 0;
  uint64_t tick_ = 0;
  std::unordered_map<int32_t, Entry> entries_;
  std::unordered_map<std::string, int32_t> by_key_;
};

}  // namespace trillion
