// The coordinator's side of shared prefixes (scheduler/prefix_cache.hpp):
// exact matching along a chain then into a block, plans of shared and copied
// blocks, partial blocks, identical blocks kept once, the
// ledger's accounting of kept blocks, least-recently-used eviction of
// unpinned leaves only, and every block back at the end.
#define BOOST_TEST_MODULE prefix_cache
#include <boost/test/unit_test.hpp>

#include <numeric>

#include "common/error.hpp"
#include "scheduler/prefix_cache.hpp"

using namespace trillion;

namespace {
constexpr int32_t B = KvPools::kBlockTokens;
std::vector<int32_t> seq(int32_t first, int32_t n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}
std::span<const int32_t> block(const std::vector<int32_t>& v, int32_t b) {
  return std::span<const int32_t>(v).subspan(size_t(b * B), size_t(B));
}
}  // namespace

BOOST_AUTO_TEST_CASE(chains_match_exactly_and_evict_leaves_first) {
  const KvPools pools(1, 10);
  KvLedger ledger(pools, 2);
  PrefixCache cache(pools, ledger);
  std::vector<KvPrefixOp> ops;
  const auto a = seq(0, 3 * B);  // three blocks
  ledger.reserve_blocks(0, 3);
  const auto k0 = cache.keep(0, PrefixCache::kNone, 0, block(a, 0), ops);
  const auto k1 = cache.keep(0, k0.id, 1, block(a, 1), ops);
  BOOST_TEST((k0.fresh && k1.fresh));
  BOOST_TEST(ops.size() == 2u);
  BOOST_TEST(ops[1].kind == KvPrefixOp::kKeep);
  BOOST_TEST(ops[1].block == 1);
  BOOST_TEST(ops[1].id == k1.id);
  BOOST_TEST(ledger.free_blocks(0) == 7);  // reserved 3, of which 2 now count as kept
  ledger.release(0);                        // the sequence ends: its third block returns
  BOOST_TEST(ledger.free_blocks(0) == 8);

  // Matching: whole blocks along the chain, then the most leading tokens of
  // the next block among the kept ones after it; exact tokens only.
  auto m = cache.match(0, a);
  BOOST_TEST(m.chain == (std::vector<int32_t>{k0.id, k1.id}));
  BOOST_TEST(m.tail == PrefixCache::kNone);  // block 2 was not kept
  auto b = a;
  b[B + 5] = 999999;  // differs in block 1, at its 6th token
  m = cache.match(0, b);
  BOOST_TEST(m.chain == (std::vector<int32_t>{k0.id}));
  BOOST_TEST((m.tail == k1.id && m.tail_tokens == 5));
  BOOST_TEST(m.tokens(B) == B + 5);
  BOOST_TEST(cache.match(0, seq(1, 2 * B)).tokens(B) == 0);  // the same tokens shifted by one: nothing
  m = cache.match(0, std::span<const int32_t>(a).first(B - 1));  // shorter than a block: a prefix of k0
  BOOST_TEST((m.chain.empty() && m.tail == k0.id && m.tail_tokens == B - 1));

  // Plans: whole blocks below the start are shared, the rows of the start's block copied.
  m = cache.match(0, b);
  auto p = cache.plan(m, B + 4);  // start inside block 1: share k0, copy 4 rows of k1
  BOOST_TEST(p.share == (std::vector<int32_t>{k0.id}));
  BOOST_TEST((p.source == k1.id && p.copy_rows == 4 && p.start == B + 4));
  BOOST_TEST(p.pins == (std::vector<int32_t>{k0.id, k1.id}));
  std::vector<KvPrefixOp> plan_ops;
  PrefixCache::plan_ops(1, p, plan_ops);
  BOOST_TEST(plan_ops.size() == 2u);
  BOOST_TEST((plan_ops[0].kind == KvPrefixOp::kShare && plan_ops[0].block == 0 && plan_ops[0].id == k0.id));
  BOOST_TEST((plan_ops[1].kind == KvPrefixOp::kCopy && plan_ops[1].block == 1 && plan_ops[1].rows == 4));
  p = cache.plan(cache.match(0, a), B);  // start at a block boundary: share one block, copy nothing
  BOOST_TEST((p.share.size() == 1u && p.copy_rows == 0 && p.source == k1.id));
  p = cache.plan(m, 1000);  // clamped to what matched
  BOOST_TEST(p.start == B + 5);

  // An identical block is kept once: the second keeper gets the same id, no op, no ledger move.
  ops.clear();
  ledger.reserve_blocks(1, 1);
  const auto again = cache.keep(1, PrefixCache::kNone, 0, block(a, 0), ops);
  BOOST_TEST(!again.fresh);
  BOOST_TEST(again.id == k0.id);
  BOOST_TEST(ops.empty());
  BOOST_TEST(ledger.free_blocks(0) == 7);

  // Pinned (two keepers hold k0 and k1's pins): nothing can go.
  BOOST_TEST(cache.evict(0, ops) == PrefixCache::kNone);
  cache.unpin({k0.id, k1.id});  // the first sequence's pins
  cache.unpin({k0.id});         // the second's
  ledger.release(1);
  // k0 has a kept child: the leaf k1 goes first, then k0.
  BOOST_TEST(cache.evict(0, ops) == k1.id);
  BOOST_TEST(ops.back().kind == KvPrefixOp::kDrop);
  BOOST_TEST(cache.evict(0, ops) == k0.id);
  BOOST_TEST(cache.evict(0, ops) == PrefixCache::kNone);
  BOOST_TEST(ledger.free_blocks(0) == 10);
  BOOST_CHECK_NO_THROW(cache.check_drained("test"));

  // A partial block (a sequence's end) is kept and matched like a full one's prefix.
  ledger.reserve_blocks(0, 1);
  const auto part = cache.keep(0, PrefixCache::kNone, 0, std::span<const int32_t>(a).first(10), ops);
  BOOST_TEST(part.fresh);
  m = cache.match(0, a);
  BOOST_TEST((m.chain.empty() && m.tail == part.id && m.tail_tokens == 10));
  BOOST_CHECK_THROW(cache.keep(0, PrefixCache::kNone, 0, std::span<const int32_t>(a).first(0), ops), Error);
  cache.unpin({part.id});
  ledger.release(0);
  BOOST_CHECK_NO_THROW(cache.check_drained("test"));
}

BOOST_AUTO_TEST_CASE(least_recently_used_goes_first_and_leaks_are_reported) {
  const KvPools pools(2, 4);  // expert parallel: two pools, slot s in pool s % 2
  KvLedger ledger(pools, 4);
  PrefixCache cache(pools, ledger);
  std::vector<KvPrefixOp> ops;
  const auto x = seq(0, B), y = seq(100, B);
  ledger.reserve_blocks(0, 1);
  ledger.reserve_blocks(2, 1);
  const auto kx = cache.keep(0, PrefixCache::kNone, 0, block(x, 0), ops);
  const auto ky = cache.keep(2, PrefixCache::kNone, 0, block(y, 0), ops);
  BOOST_TEST(cache.match(1, x).tokens(B) == 0);  // kept in pool 0 only
  cache.unpin({kx.id, ky.id});
  ledger.release(0);
  ledger.release(2);
  BOOST_TEST(cache.match(0, x).chain.size() == 1u);  // x used after y
  BOOST_TEST(cache.evict(0, ops) == ky.id);
  BOOST_TEST(ops.back().slot == 2);  // the keeper's slot names the pool
  cache.pin({kx.id});
  BOOST_CHECK_THROW(cache.check_drained("test"), Error);  // still pinned at the end: reported
  BOOST_CHECK_THROW(cache.unpin({ky.id}), Error);  // evicted: unknown
}
