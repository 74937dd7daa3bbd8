// The KV-cache pools of a run, in one place: how many pools there are, which
// pool (and which slot within it) holds a sequence slot, how many blocks of
// how many positions each pool has, and (KvLedger) which of them admitted
// sequences have reserved.
//
// One rank and pipeline parallel have one pool: every stage holds the same
// block tables for its own layers. Expert parallel has one pool per rank:
// slot s lives on rank s % ranks, as that rank's local slot s / ranks. The
// blocks themselves are KvCache's (model/kv_cache.hpp, sized by
// pool_blocks() here); the coordinator's scheduler keeps the ledger, so a
// request is admitted only when its blocks are free and a running sequence
// never finds its pool dry.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace trillion {

class KvPools {
 public:
  static constexpr int32_t kBlockTokens = 64;  // positions per block of every KvCache

  // Blocks of a pool for `slots` slots of `max_len` positions: `tokens`
  // positions rounded up to blocks, or (0 tokens) enough for every slot to
  // fill max_len positions (the unpaged capacity).
  static int64_t pool_blocks(int32_t slots, int32_t max_len, int64_t tokens);
  // Slots of `slots` that live in `pool` of `pools` (s % pools == pool).
  static int32_t slots_in_pool(int32_t slots, int32_t pools, int32_t pool);
  // Expert parallel: the slots every pool is sized for, the largest pool's
  // (pool 0's). Pools have one size, the one the coordinator's ledger counts
  // with, even when slots do not divide among the ranks (a smaller pool's
  // spare blocks hold kept prefixes).
  static int32_t sized_slots(int32_t slots, int32_t pools) {
    return slots_in_pool(slots, pools, 0) > 0 ? slots_in_pool(slots, pools, 0) : 1;
  }

  KvPools() = default;  // no limit (test fakes without a cache)
  KvPools(int32_t pools, int64_t blocks_per_pool, int32_t block_tokens = kBlockTokens);

  bool limited() const { return block_tokens_ > 0; }
  int32_t pools() const { return pools_; }
  int64_t blocks_per_pool() const { return blocks_; }
  int32_t block_tokens() const { return block_tokens_; }
  int64_t pool_positions() const { return blocks_ * block_tokens_; }

  int32_t pool_of(int32_t slot) const { return slot % pools_; }
  int32_t local_slot(int32_t slot) const { return slot / pools_; }
  // Blocks a sequence of `positions` positions takes (0 when unlimited).
  int64_t blocks_for(int64_t positions) const;
  // Whether a sequence of `positions` positions fits an empty pool.
  bool fits_empty(int64_t positions) const { return !limited() || blocks_for(positions) <= blocks_; }

 private:
  int32_t pools_ = 1;
  int64_t blocks_ = 0;
  int32_t block_tokens_ = 0;  // 0: unlimited
};

// The reservations of admitted sequences, per pool: a slot reserves the
// blocks of its sequence's whole length at admission and returns them when
// the sequence finishes.
class KvLedger {
 public:
  KvLedger(const KvPools& pools, int32_t slots);
  // Whether `slot`'s pool has the blocks of `positions` positions free.
  bool can_reserve(int32_t slot, int64_t positions) const;
  // Reserves them for `slot` (on top of what it holds); throws Error when
  // they are not free.
  void reserve(int32_t slot, int64_t positions);
  void release(int32_t slot);  // returns the slot's reservation (none: no-op)

  // In blocks, for shared prefixes (scheduler/prefix_cache.hpp): a sequence
  // that shares kept blocks reserves only the rest; a block it keeps moves
  // from its reservation to the cache (to_cache), and returns to the pool
  // when the cache drops it (from_cache).
  bool can_reserve_blocks(int32_t slot, int64_t blocks) const;
  void reserve_blocks(int32_t slot, int64_t blocks);
  void to_cache(int32_t slot);
  void from_cache(int32_t pool);
  int64_t free_blocks(int32_t pool) const { return free_.at(size_t(pool)); }

 private:
  KvPools pools_;
  std::vector<int64_t> free_;      // [pools] blocks not reserved
  std::vector<int64_t> reserved_;  // [slots] blocks held
};

}  // namespace trillion
