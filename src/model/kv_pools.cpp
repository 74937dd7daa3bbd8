#include "model/kv_pools.hpp"

#include <algorithm>
#include <string>

#include "common/error.hpp"

namespace trillion {

namespace {
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

int64_t KvPools::pool_blocks(int32_t slots, int32_t max_len, int64_t tokens) {
  return tokens > 0 ? ceil_div(tokens, kBlockTokens)
                    : int64_t(std::max(slots, 0)) * ceil_div(std::max(max_len, 0), kBlockTokens);
}

int32_t KvPools::slots_in_pool(int32_t slots, int32_t pools, int32_t pool) {
  return std::max(0, (slots - pool + pools - 1) / pools);
}

KvPools::KvPools(int32_t pools, int64_t blocks_per_pool, int32_t block_tokens)
    : pools_(pools), blocks_(blocks_per_pool), block_tokens_(block_tokens) {
  if (pools < 1 || blocks_per_pool < 0 || block_tokens < 1)
    throw Error("KvPools: bad geometry (" + std::to_string(pools) + " pools of " + std::to_string(blocks_per_pool) +
                " blocks of " + std::to_string(block_tokens) + " positions)");
}

int64_t KvPools::blocks_for(int64_t positions) const {
  return limited() ? ceil_div(std::max<int64_t>(positions, 0), block_tokens_) : 0;
}

KvLedger::KvLedger(const KvPools& pools, int32_t slots)
    : pools_(pools), free_(size_t(pools.pools()), pools.blocks_per_pool()), reserved_(size_t(std::max(slots, 0)), 0) {}

bool KvLedger::can_reserve(int32_t slot, int64_t positions) const {
  return can_reserve_blocks(slot, pools_.blocks_for(positions));
}

void KvLedger::reserve(int32_t slot, int64_t positions) { reserve_blocks(slot, pools_.blocks_for(positions)); }

bool KvLedger::can_reserve_blocks(int32_t slot, int64_t blocks) const {
  return free_.at(size_t(pools_.pool_of(slot))) >= blocks;
}

void KvLedger::reserve_blocks(int32_t slot, int64_t blocks) {
  if (!can_reserve_blocks(slot, blocks))
    throw Error("KV cache: slot " + std::to_string(slot) + " reserves " + std::to_string(blocks) +
                " blocks, its pool has " + std::to_string(free_.at(size_t(pools_.pool_of(slot)))) + " free");
  free_[size_t(pools_.pool_of(slot))] -= blocks;
  reserved_.at(size_t(slot)) += blocks;
}

void KvLedger::to_cache(int32_t slot) {
  if (!pools_.limited()) return;
  if (reserved_.at(size_t(slot)) < 1)
    throw Error("KV cache: slot " + std::to_string(slot) + " keeps a block it has not reserved");
  --reserved_[size_t(slot)];
}

void KvLedger::from_cache(int32_t pool) {
  if (pools_.limited()) ++free_.at(size_t(pool));
}

void KvLedger::release(int32_t slot) {
  int64_t& held = reserved_.at(size_t(slot));
  free_.at(size_t(pools_.pool_of(slot))) += held;
  held = 0;
}

}  // namespace trillion
