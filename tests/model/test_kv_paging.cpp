// The paged KV cache: a sequence's logits keep their bits whatever blocks it
// gets (scattered among other sequences', reused after a release); the pool
// runs dry with an error, released blocks come back, and a new sequence at
// position 0 takes over its slot's blocks. The pool is never cleared, and no
// position is read before it is written; its pages are resident only where
// rows were written.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <random>

#include "common/error.hpp"
#include "platform/process_memory.hpp"
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

namespace {

// Fills every block of `cache` with NaN through the public accessors: the
// slots take all of them (one row per block), each block's rows are set for
// every layer, and the slots are released. The pool is never cleared after
// this, so a read of any position no row has written since would carry a NaN
// into the logits (attention's dot products and its weighted sum take every
// position they read, and 0 x NaN is NaN).
void poison_every_block(KvCache& cache, const ModelConfig& cfg, int64_t layers) {
  Batch all, release;
  for (int32_t s = 0; s < cache.slots(); ++s) {
    for (int32_t p = 0; p < cache.max_len() && int64_t(all.size()) < cache.blocks(); p += B) all.rows.push_back({s, p});
    release.released.push_back(s);
  }
  cache.prepare(all);
  BOOST_TEST(cache.free_blocks() == 0);
  for (const TokenRow& r : all.rows)
    for (int64_t l = 0; l < layers; ++l) {
      std::fill_n(cache.c_kv_block(r.slot, l, r.pos), B * cfg.kv_lora_rank, std::nanf(""));
      std::fill_n(cache.k_pe_block(r.slot, l, r.pos), B * cfg.qk_rope_head_dim, std::nanf(""));
    }
  cache.prepare(release);
  BOOST_TEST(cache.free_blocks() == cache.blocks());
}

}  // namespace

// The pool is never cleared (kv_cache.hpp says why that is sound): with every
// block holding NaN beforehand, sequences that prefill across block edges,
// decode one row at a time, share a kept block and copy part of one get the
// bits of the same sequences in a fresh cache.
BOOST_AUTO_TEST_CASE(no_position_is_read_before_it_is_written) {
  TinyModel m({.format = "fp8", .hidden = 160});
  ThreadPool pool(2);
  Transformer model(m.cfg, LayerRange{0, m.cfg.num_hidden_layers, true, true}, m.source, pool);
  const int64_t V = m.cfg.vocab_size, layers = m.cfg.num_hidden_layers;
  const int T = B + 30;
  const auto A = random_tokens(T, 61, V), C = random_tokens(T, 62, V);
  std::vector<int32_t> D(A.begin(), A.begin() + 40);  // A's first 40 tokens, then its own
  for (int32_t t : random_tokens(T - 40, 63, V)) D.push_back(t);

  auto run_all = [&](KvCache& cache) {
    std::vector<float> out;
    auto add = [&](const std::vector<float>& v) { out.insert(out.end(), v.begin(), v.end()); };
    add(run_step(model, cache, rows_of(0, 0, B + 5), slice(A, 0, B + 5)));  // A: prefill across a block edge
    for (int p = B + 5; p < T; ++p) {  // A decodes; C prefills beside it, then decodes too
      Batch b = rows_of(0, p, 1);
      std::vector<int32_t> t{A[size_t(p)]};
      if (p == B + 5) {
        for (const auto& r : rows_of(1, 0, p + 1).rows) b.rows.push_back(r);
        for (int32_t x : slice(C, 0, p + 1)) t.push_back(x);
      } else {
        b.rows.push_back({1, p});
        t.push_back(C[size_t(p)]);
      }
      add(run_step(model, cache, b, t));
    }
    Batch keep = rows_of(2, 0, 1);  // A's first block kept; D copies its first 40 rows
    keep.prefix_ops = {{KvPrefixOp::kKeep, 0, 0, 9}};
    keep.released = {1};
    add(run_step(model, cache, keep, {D[0]}));
    Batch copy = rows_of(2, 40, T - 40);
    copy.prefix_ops = {{KvPrefixOp::kCopy, 2, 0, 9, 40}};
    add(run_step(model, cache, copy, slice(D, 40, T - 40)));
    return out;
  };

  KvCache fresh(m.cfg, model.range(), 3, 2 * B);
  const auto ref = run_all(fresh);
  for (float v : ref) BOOST_REQUIRE(std::isfinite(v));
  KvCache poisoned(m.cfg, model.range(), 3, 2 * B);
  poison_every_block(poisoned, m.cfg, layers);
  const auto got = run_all(poisoned);
  BOOST_TEST(got.size() == ref.size());
  BOOST_TEST(same_bits(got.data(), ref.data(), ref.size()));
}

// The pool's pages come from the kernel untouched: a pool of about 1 GB adds
// next to nothing to the resident set until rows are written, and then only
// the pages of the blocks they took.
BOOST_AUTO_TEST_CASE(the_pool_is_resident_only_where_written) {
  TinyModel m({.format = "bf16"});
  const LayerRange all{0, m.cfg.num_hidden_layers, true, true};
  const int64_t before = platform::resident_bytes();
  if (before == 0) {
    BOOST_TEST_MESSAGE("this platform does not report the resident set");
    return;
  }
  KvCache cache(m.cfg, all, 2, 4 * B, int64_t(1) << 21);  // 2^21 positions
  BOOST_TEST(cache.bytes() > int64_t(900) << 20);
  const int64_t mb = 1 << 20;
  BOOST_TEST(platform::resident_bytes() - before < 16 * mb);
  cache.prepare(rows_of(0, 0, 2 * B));
  for (int64_t l = 0; l < m.cfg.num_hidden_layers; ++l)
    for (int32_t p = 0; p < 2 * B; p += B) {
      std::fill_n(cache.c_kv_block(0, l, p), B * m.cfg.kv_lora_rank, 1.0f);
      std::fill_n(cache.k_pe_block(0, l, p), B * m.cfg.qk_rope_head_dim, 1.0f);
    }
  // Two blocks in each layer's part of c_kv and of k_pe: at most a 2 MiB page each.
  BOOST_TEST(platform::resident_bytes() - before < 16 * mb + 4 * m.cfg.num_hidden_layers * 2 * mb);
}
