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
