#include "scheduler/prefix_cache.hpp"

#include <cstring>

#include "common/error.hpp"

namespace trillion {

PrefixCache::PrefixCache(const KvPools& pools, KvLedger& ledger)
    : pools_(pools), ledger_(ledger), block_tokens_(pools.limited() ? pools.block_tokens() : KvPools::kBlockTokens) {}

std::string PrefixCache::key_of(int32_t pool, int32_t parent, std::span<const int32_t> tokens) const {
  std::string k(sizeof(int32_t) * (2 + tokens.size()), '\0');
  std::memcpy(k.data(), &pool, sizeof pool);
  std::memcpy(k.data() + sizeof pool, &parent, sizeof parent);
  if (!tokens.empty()) std::memcpy(k.data() + 2 * sizeof(int32_t), tokens.data(), tokens.size_bytes());
  return k;
}

std::vector<int32_t> PrefixCache::match(int32_t pool, std::span<const int32_t> tokens, int64_t max_blocks) {
  std::vector<int32_t> ids;
  int32_t parent = kNone;
  const int64_t B = block_tokens_;
  for (int64_t b = 0; b < max_blocks && (b + 1) * B <= int64_t(tokens.size()); ++b) {
    const auto it = by_key_.find(key_of(pool, parent, tokens.subspan(size_t(b * B), size_t(B))));
    if (it == by_key_.end()) break;
    entries_.at(it->second).used = ++tick_;
    ids.push_back(parent = it->second);
  }
  return ids;
}

void PrefixCache::pin(const std::vector<int32_t>& ids) {
  for (int32_t id : ids) ++entries_.at(id).users;
}

void PrefixCache::unpin(const std::vector<int32_t>& ids) {
  for (int32_t id : ids) {
    Entry& e = entries_.at(id);
    if (e.users < 1) throw Error("prefix cache: block " + std::to_string(id) + " unpinned more often than pinned");
    --e.users;
  }
}

void PrefixCache::share_ops(int32_t slot, const std::vector<int32_t>& ids, std::vector<KvPrefixOp>& ops) {
  for (size_t b = 0; b < ids.size(); ++b) ops.push_back({KvPrefixOp::kShare, slot, int32_t(b), ids[b]});
}

PrefixCache::Kept PrefixCache::keep(int32_t slot, int32_t parent, int32_t block, std::span<const int32_t> block_tokens,
                                    std::vector<KvPrefixOp>& ops) {
  if (int64_t(block_tokens.size()) != block_tokens_)
    throw Error("prefix cache: a kept block must be full (" + std::to_string(block_tokens.size()) + " tokens)");
  const int32_t pool = pools_.pool_of(slot);
  std::string key = key_of(pool, parent, block_tokens);
  if (const auto it = by_key_.find(key); it != by_key_.end()) {
    Entry& e = entries_.at(it->second);
    ++e.users;
    e.used = ++tick_;
    return {it->second, false};
  }
  const int32_t id = next_id_++;
  Entry e;
  e.pool = pool;
  e.slot = slot;
  e.parent = parent;
  e.key = key;
  e.users = 1;
  e.used = ++tick_;
  if (parent != kNone) ++entries_.at(parent).children;
  entries_.emplace(id, std::move(e));
  by_key_.emplace(std::move(key), id);
  ops.push_back({KvPrefixOp::kKeep, slot, block, id});
  ledger_.to_cache(slot);
  return {id, true};
}

int32_t PrefixCache::evict(int32_t pool, std::vector<KvPrefixOp>& ops) {
  int32_t best = kNone;
  uint64_t oldest = UINT64_MAX;
  for (const auto& [id, e] : entries_)
    if (e.pool == pool && e.users == 0 && e.children == 0 && e.used < oldest) {
      oldest = e.used;
      best = id;
    }
  if (best == kNone) return kNone;
  const Entry& e = entries_.at(best);
  ops.push_back({KvPrefixOp::kDrop, e.slot, 0, best});
  if (e.parent != kNone) --entries_.at(e.parent).children;
  by_key_.erase(e.key);
  entries_.erase(best);
  ledger_.from_cache(pool);
  return best;
}

int64_t PrefixCache::kept(int32_t pool) const {
  int64_t n = 0;
  for (const auto& [id, e] : entries_) n += e.pool == pool;
  return n;
}

void PrefixCache::check_drained(const char* who) {
  std::vector<KvPrefixOp> drops;  // no step follows: the run is over
  for (int32_t p = 0; p < pools_.pools(); ++p)
    while (evict(p, drops) != kNone) {}
  if (!entries_.empty())
    throw Error(std::string(who) + ": " + std::to_string(entries_.size()) + " kept KV-cache blocks still pinned at the end");
  for (int32_t p = 0; p < pools_.pools() && pools_.limited(); ++p)
    if (ledger_.free_blocks(p) != pools_.blocks_per_pool())
      throw Error(std::string(who) + ": KV-cache blocks leaked: pool " + std::to_string(p) + " has " +
                  std::to_string(ledger_.free_blocks(p)) + " of " + std::to_string(pools_.blocks_per_pool()) +
                  " free at the end");
}

}  // namespace trillion
