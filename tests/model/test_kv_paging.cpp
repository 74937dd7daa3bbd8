// The paged KV cache: a sequence's logits keep their bits whatever blocks it
// gets (scattered among other sequences', reused after a release); the pool
// runs dry with an error, released blocks come back, and a new sequence at
// position 0 takes over its slot's blocks.
#include <boost/test/unit_test.hpp>

#include <random>

#include "common/error.hpp"
#include "model_fixture.hpp"

using namespace trillion;
using namespace trillion::test;

namespace {

std::vector<int32_t> slice(const std::vector<int32_t>& v, int b, int n) { return {v.begin() + b, v.begin() + b + n}; }

constexpr int32_t B = KvCache::kBlockTokens;

}  // namespace

BOOST_AUTO_TEST_CASE(paged_blocks_keep_the_bits) {
  TinyModel m({.format = "fp8", .hidden = 160});
  ThreadPool pool(2);
  Transformer model(m.cfg, LayerRange{0, m.cfg.num_hidden_layers, true, true}, m.source, pool);
  const int64_t V = m.cfg.vocab_size;
  const int T = 2 * B + 20;  // three blocks
  const auto A = random_tokens(T, 41, V), Bt = random_tokens(B + 10, 42, V), C = random_tokens(B + 5, 43, V);

  // A alone in a fresh cache: its blocks are 0, 1, 2 in order.
  KvCache alone(m.cfg, model.range(), 1, T);
  const auto ref = run_step(model, alone, rows_of(0, 0, T), A);

  // A in slot 2 of a pool of 5 blocks, its blocks scattered: B (slot 0) and C
  // (slot 1) take blocks between A's chunks, B is released and A reuses its blocks.
  KvCache paged(m.cfg, model.range(), 3, T, 5 * B);
  BOOST_TEST(paged.blocks() == 5);
  run_step(model, paged, rows_of(0, 0, B + 10), Bt);                         // B: blocks 0, 1
  const auto a1 = run_step(model, paged, rows_of(2, 0, 30), slice(A, 0, 30));  // A: block 2
  run_step(model, paged, rows_of(1, 0, 20), slice(C, 0, 20));                 // C: block 3
  BOOST_TEST(paged.free_blocks() == 1);
  Batch b2 = rows_of(2, 30, B + 10);  // A crosses into its second block: B's old block 0
  b2.released = {0};                  // B ends first: blocks 0, 1 return
  const auto a2 = run_step(model, paged, b2, slice(A, 30, B + 10));
  BOOST_TEST(paged.free_blocks() == 2);
  Batch b3 = rows_of(1, 20, int32_t(C.size()) - 20);  // C's second block: 1 ...
  for (const auto& r : rows_of(2, B + 40, T - B - 40).rows) b3.rows.push_back(r);  // ... A's third: 4
  std::vector<int32_t> t3 = slice(C, 20, int(C.size()) - 20);
  for (int32_t t : slice(A, B + 40, T - B - 40)) t3.push_back(t);
  const auto m3 = run_step(model, paged, b3, t3);
  BOOST_TEST(paged.free_blocks() == 0);
  BOOST_TEST(same_bits(a1.data(), ref.data(), a1.size()));
  BOOST_TEST(same_bits(a2.data(), &ref[size_t(30 * V)], a2.size()));
  const size_t c_rows = C.size() - 20;
  BOOST_TEST(same_bits(&m3[c_rows * size_t(V)], &ref[size_t((B + 40) * V)], size_t((T - B - 40) * V)));
}

BOOST_AUTO_TEST_CASE(pool_runs_dry_releases_and_restarts) {
  TinyModel m({.format = "bf16"});
  const LayerRange all{0, m.cfg.num_hidden_layers, true, true};
  BOOST_TEST(KvPools::pool_blocks(3, 100, 0) == 6);  // default: every slot can fill max_len
  BOOST_TEST(KvPools::pool_blocks(3, 100, 130) == 3);
  KvCache cache(m.cfg, all, 2, 4 * B, 2 * B);
  BOOST_TEST(cache.bytes() == KvCache::pool_bytes(m.cfg, m.cfg.num_hidden_layers, 2));
  cache.prepare(rows_of(0, 0, B + 1));  // two blocks
  BOOST_TEST(cache.free_blocks() == 0);
  BOOST_CHECK_THROW(cache.prepare(rows_of(1, 0, 1)), Error);
  Batch release;
  release.released = {0};
  cache.prepare(release);
  BOOST_TEST(cache.free_blocks() == 2);
  cache.prepare(rows_of(1, 0, 10));
  BOOST_TEST(cache.free_blocks() == 1);
  cache.prepare(rows_of(1, 0, 1));  // a new sequence in slot 1: its old block is reused
  BOOST_TEST(cache.free_blocks() == 1);
  BOOST_CHECK_THROW(cache.c_kv_block(1, 0, B), Error);  // no block there
}

// Shared prefixes: B computes its first block, keeps it, and ends; C starts
// with the same 64 tokens, shares the kept block and computes only the rest:
// C's logits have the bits of C computed alone from position 0; so do those
// of D, which copies the block's first 40 rows and computes from there. The
// shared block is read-only, and every block returns once the kept id is dropped.
BOOST_AUTO_TEST_CASE(shared_block_gives_the_bits_of_computing_it) {
  TinyModel m({.format = "fp8", .hidden = 160});
  ThreadPool pool(2);
  Transformer model(m.cfg, LayerRange{0, m.cfg.num_hidden_layers, true, true}, m.source, pool);
  const int64_t V = m.cfg.vocab_size;
  const auto prefix = random_tokens(B, 51, V);
  std::vector<int32_t> Bt = prefix, C = prefix;
  for (int32_t t : random_tokens(20, 52, V)) Bt.push_back(t);
  for (int32_t t : random_tokens(30, 53, V)) C.push_back(t);

  KvCache alone(m.cfg, model.range(), 1, 2 * B);
  const auto ref = run_step(model, alone, rows_of(0, 0, int32_t(C.size())), C);

  KvCache cache(m.cfg, model.range(), 2, 2 * B, 4 * B);
  run_step(model, cache, rows_of(0, 0, int32_t(Bt.size())), Bt);  // slot 0: blocks 0, 1
  Batch keep = rows_of(0, int32_t(Bt.size()), 1);                 // a decode row of B ...
  keep.prefix_ops = {{KvPrefixOp::kKeep, 0, 0, 7}};                // ... after block 0 is kept as id 7
  run_step(model, cache, keep, {Bt[3]});
  BOOST_TEST(cache.kept_blocks() == 1);
  Batch share = rows_of(1, B, int32_t(C.size()) - B);  // C from position 64 in slot 1
  share.released = {0};                                // B ends: its second block returns, block 0 stays
  share.prefix_ops = {{KvPrefixOp::kShare, 1, 0, 7}};
  const auto got = run_step(model, cache, share, slice(C, B, int(C.size()) - B));
  BOOST_TEST(same_bits(got.data(), &ref[size_t(B * V)], got.size()));
  BOOST_TEST(cache.free_blocks() == 2);  // 4 - the shared block - C's second block

  // Writing into the shared block is refused (slot 0 restarting at position 1 with block 0 shared).
  Batch bad = rows_of(0, 1, 1);
  bad.prefix_ops = {{KvPrefixOp::kShare, 0, 0, 7}};
  BOOST_CHECK_THROW(cache.prepare(bad), Error);

  // A copy of the kept block's first 40 rows in a block of D's own: D
  // computes from position 40 (inside the block) and gets the bits of C alone.
  Batch copy = rows_of(0, 40, int32_t(C.size()) - 40);
  copy.prefix_ops = {{KvPrefixOp::kCopy, 0, 0, 7, 40}};
  copy.released = {0};  // drops the failed share above
  const auto got2 = run_step(model, cache, copy, slice(C, 40, int(C.size()) - 40));
  BOOST_TEST(same_bits(got2.data(), &ref[size_t(40 * V)], got2.size()));
  BOOST_TEST(cache.free_blocks() == 0);  // kept block, C's two, D's two

  Batch end;
  end.released = {0, 1};
  end.prefix_ops = {{KvPrefixOp::kDrop, 1, 0, 7}};
  cache.prepare(end);
  BOOST_TEST(cache.free_blocks() == 4);
  BOOST_TEST(cache.kept_blocks() == 0);
  Batch unknown;
  unknown.prefix_ops = {{KvPrefixOp::kShare, 0, 0, 7}};  // dropped: no longer kept
  BOOST_CHECK_THROW(cache.prepare(unknown), Error);
}
