#include "scheduler/prefix_cache.hpp"

#include <algorithm>
#include <cstring>

#include "common/error.hpp"

namespace trillion {

PrefixCache::PrefixCache(const KvPools& pools, KvLedger& ledger)
    : pools_(pools), ledger_(ledger), block_tokens_(pools.limited() ? pools.block_tokens() : KvPools::kBlockTokens) {}

std::string PrefixCache::key_of(int32_t pool, int32_t parent, std::span<const int32_t> tokens) {
  std::string k(sizeof(int32_t) * (2 + tokens.size()), '\0');
  std::memcpy(k.data(), &pool, sizeof pool);
  std::memcpy(k.data() + sizeof pool, &parent, sizeof parent);
  if (!tokens.empty()) std::memcpy(k.data() + 2 * sizeof(int32_t), tokens.data(), tokens.size_bytes());
  return k;
}

PrefixCache::Match PrefixCache::match(int32_t pool, std::span<const int32_t> tokens) {
  Match m;
  int32_t parent = kNone;
  const size_t B = size_t(block_tokens_);
  size_t at = 0;
  for (; at + B <= tokens.size(); at += B) {  // whole blocks, exactly
    const auto it = by_key_.find(key_of(pool, parent, tokens.subspan(at, B)));
    if (it == by_key_.end()) break;
    entries_.at(it->second).used = ++tick_;
    m.chain.push_back(parent = it->second);
  }
  if (at >= tokens.size()) return m;
  // The next block: the kept block after `parent` sharing the most leading tokens.
  const auto rest = tokens.subspan(at, std::min(B, tokens.size() - at));
  const auto br = branches_.find({pool, parent, rest[0]});
  if (br == branches_.end()) return m;
  for (int32_t id : br->second) {
    const auto& t = entries_.at(id).tokens;
    const size_t n = std::min(t.size(), rest.size());
    const size_t common = size_t(std::mismatch(t.begin(), t.begin() + std::ptrdiff_t(n), rest.begin()).first - t.begin());
    if (int32_t(common) > m.tail_tokens) {
      m.tail = id;
      m.tail_tokens = int32_t(common);
    }
  }
  if (m.tail != kNone) entries_.at(m.tail).used = ++tick_;
  return m;
}

PrefixCache::Plan PrefixCache::plan(const Match& m, int64_t start) const {
  Plan p;
  const int64_t B = block_tokens_;
  start = std::clamp<int64_t>(start, 0, m.tokens(block_tokens_));
  p.start = start;
  const size_t whole = size_t(start / B);
  p.share.assign(m.chain.begin(), m.chain.begin() + std::ptrdiff_t(whole));
  p.pins = p.share;
  // The kept block covering `start` (its rows below start are copied).
  if (whole < m.chain.size()) p.source = m.chain[whole];
  else p.source = m.tail;  // start is at most chain + tail tokens: its rows below start are the tail's
  p.copy_rows = int32_t(start - int64_t(whole) * B);
  if (p.source != kNone) p.pins.push_back(p.source);
  return p;
}

void PrefixCache::plan_ops(int32_t slot, const Plan& p, std::vector<KvPrefixOp>& ops) {
  for (size_t b = 0; b < p.share.size(); ++b) ops.push_back({KvPrefixOp::kShare, slot, int32_t(b), p.share[b], 0});
  if (p.copy_rows > 0) ops.push_back({KvPrefixOp::kCopy, slot, int32_t(p.share.size()), p.source, p.copy_rows});
}

void PrefixCache::pin(const std::vector<int32_t>& ids) {
  for (int32_t id : ids) ++entries_.at(id).users;
}

void PrefixCache::unpin(const std::vector<int32_t>& ids) {
  for (int32_t id : ids) {
    const auto it = entries_.find(id);
    if (it == entries_.end()) throw Error("prefix cache: block " + std::to_string(id) + " unpinned, but it is not kept");
    Entry& e = it->second;
    if (e.users < 1) throw Error("prefix cache: block " + std::to_string(id) + " unpinned more often than pinned");
    --e.users;
  }
}

PrefixCache::Kept PrefixCache::keep(int32_t slot, int32_t parent, int32_t block, std::span<const int32_t> tokens,
                                    std::vector<KvPrefixOp>& ops) {
  if (tokens.empty() || int64_t(tokens.size()) > block_tokens_)
    throw Error("prefix cache: a kept block holds 1.." + std::to_string(block_tokens_) + " tokens, not " +
                std::to_string(tokens.size()));
  const int32_t pool = pools_.pool_of(slot);
  std::string key = key_of(pool, parent, tokens);
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
  e.tokens.assign(tokens.begin(), tokens.end());
  e.users = 1;
  e.used = ++tick_;
  if (parent != kNone) ++entries_.at(parent).children;
  branches_[{pool, parent, tokens[0]}].push_back(id);
  entries_.emplace(id, std::move(e));
  by_key_.emplace(std::move(key), id);
  ops.push_back({KvPrefixOp::kKeep, slot, block, id, 0});
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
  ops.push_back({KvPrefixOp::kDrop, e.slot, 0, best, 0});
  if (e.parent != kNone) --entries_.at(e.parent).children;
  auto br = branches_.find({e.pool, e.parent, e.tokens[0]});
  std::erase(br->second, best);
  if (br->second.empty()) branches_.erase(br);
  by_key_.erase(key_of(e.pool, e.parent, e.tokens));
  entries_.erase(best);
  ledger_.from_cache(pool);
  return best;
}

void PrefixCache::check_drained(const char* who) {
  std::vector<KvPrefixOp> drops;  // no step follows: the run is over
  for (int32_t p = 0; p < pools_.pools(); ++p)
    while (evict(p, drops) != kNone) {}
  if (!entries_.empty())
    throw Error(std::string(who) + ": " + std::to_string(entries_.size()) +
                " kept KV-cache blocks still pinned at the end");
  for (int32_t p = 0; p < pools_.pools() && pools_.limited(); ++p)
    if (ledger_.free_blocks(p) != pools_.blocks_per_pool())
      throw Error(std::string(who) + ": KV-cache blocks leaked: pool " + std::to_string(p) + " has " +
                  std::to_string(ledger_.free_blocks(p)) + " of " + std::to_string(pools_.blocks_per_pool()) +
                  " free at the end");
}

}  // namespace trillion
