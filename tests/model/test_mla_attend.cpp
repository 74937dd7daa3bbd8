// model/mla_attend against a float64 softmax attention computed here from the
// definition, over rows whose lengths straddle the chunk and block edges; and
// its bits independent of the batch around a row and of the thread count,
// also when a lone row's heads are split over the threads.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "common/thread_pool.hpp"
#include "config/model_config.hpp"
#include "kernels/vector_ops.hpp"
#include "model/kv_cache.hpp"
#include "model/mla_attend.hpp"

using namespace trillion;

namespace {

constexpr int64_t H = 3, R = 40, ROPE = 8;

struct Fixture {
  ModelConfig cfg;
  std::unique_ptr<KvCache> cache;
  std::vector<float> q_lat, q_pe;  // [H, n, R], [n, H, ROPE]
  Batch batch;

  // Slot i holds lens[i] positions; row i is its last position.
  explicit Fixture(const std::vector<int32_t>& lens, uint32_t seed = 7) {
    cfg.kv_lora_rank = R;
    cfg.qk_rope_head_dim = ROPE;
    cfg.num_hidden_layers = 1;
    int32_t longest = 1;
    for (int32_t l : lens) longest = std::max(longest, l);
    cache = std::make_unique<KvCache>(cfg, LayerRange{0, 1}, int32_t(lens.size()), longest);
    Batch fill;
    for (size_t i = 0; i < lens.size(); ++i)
      for (int32_t p = 0; p < lens[i]; ++p) fill.rows.push_back({int32_t(i), p});
    cache->prepare(fill);
    std::mt19937 rng(seed);
    std::normal_distribution<float> N(0.f, 1.f);
    for (const TokenRow& row : fill.rows) {
      const int64_t k = row.pos % KvCache::kBlockTokens;
      for (int64_t i = 0; i < R; ++i) cache->c_kv_block(row.slot, 0, row.pos)[k * R + i] = N(rng);
      for (int64_t i = 0; i < ROPE; ++i) cache->k_pe_block(row.slot, 0, row.pos)[k * ROPE + i] = N(rng);
    }
    const int64_t n = int64_t(lens.size());
    for (size_t i = 0; i < lens.size(); ++i) batch.rows.push_back({int32_t(i), lens[i] - 1});
    q_lat.resize(size_t(H * n * R));
    q_pe.resize(size_t(n * H * ROPE));
    for (float& v : q_lat) v = 0.4f * N(rng);  // scores of a few units: a peaked but not one-hot softmax
    for (float& v : q_pe) v = 0.4f * N(rng);
  }

  std::vector<float> run(int threads) const {
    ThreadPool pool(threads);
    std::vector<float> ctx(q_lat.size(), -1.f);
    mla_attend(MlaShape{H, R, ROPE, 0.3f}, *cache, 0, batch, q_lat.data(), q_pe.data(), H * ROPE, ROPE, ctx.data(),
               pool);
    return ctx;
  }

  // The definition, in float64.
  std::vector<double> expected() const {
    const int64_t n = batch.size();
    std::vector<double> ctx(q_lat.size(), 0.0);
    for (int64_t t = 0; t < n; ++t) {
      const TokenRow row = batch.rows[size_t(t)];
      for (int64_t h = 0; h < H; ++h) {
        std::vector<double> s(size_t(row.pos + 1));
        for (int32_t j = 0; j <= row.pos; ++j) {
          const int64_t k = j % KvCache::kBlockTokens;
          double a = 0;
          for (int64_t i = 0; i < R; ++i)
            a += double(q_lat[size_t((h * n + t) * R + i)]) * cache->c_kv_block(row.slot, 0, j)[k * R + i];
          for (int64_t i = 0; i < ROPE; ++i)
            a += double(q_pe[size_t(t * H * ROPE + h * ROPE + i)]) * cache->k_pe_block(row.slot, 0, j)[k * ROPE + i];
          s[size_t(j)] = a * double(0.3f);
        }
        double mx = s[0], sum = 0;
        for (double v : s) mx = std::max(mx, v);
        for (double& v : s) sum += (v = std::exp(v - mx));
        for (int32_t j = 0; j <= row.pos; ++j)
          for (int64_t i = 0; i < R; ++i)
            ctx[size_t((h * n + t) * R + i)] +=
                s[size_t(j)] / sum * cache->c_kv_block(row.slot, 0, j)[(j % KvCache::kBlockTokens) * R + i];
      }
    }
    return ctx;
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(mla_attend_suite)

BOOST_AUTO_TEST_CASE(matches_float64_softmax_attention_across_chunk_edges) {
  // 1 position; inside one block; a block edge; one chunk exactly; one past it; several chunks, ragged.
  const Fixture f({1, 30, 64, 65, int32_t(kMlaChunk), int32_t(kMlaChunk) + 1, 3 * int32_t(kMlaChunk) + 77});
  const std::vector<float> got = f.run(2);
  const std::vector<double> want = f.expected();
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(double(got[i]) - want[i]));
  // ctx entries are convex combinations of N(0,1) latents (|ctx| < ~4); float32
  // sums over <= 845 terms: a few 1e-7 relative, far under 1e-5 absolute.
  BOOST_TEST_MESSAGE("worst |mla_attend - float64| = " << worst);
  BOOST_TEST(worst < 1e-5);
}

BOOST_AUTO_TEST_CASE(a_rows_bits_depend_on_its_own_positions_only) {
  const std::vector<int32_t> lens = {700, 3, 300, 1, 513};
  const Fixture all(lens);
  const std::vector<float> one = all.run(1), three = all.run(3);
  BOOST_TEST(one == three);  // thread count: same bits
  // Row 4 (513 positions) alone in its batch, with the same cache contents: same bits.
  Fixture alone(lens);
  alone.batch.rows = {alone.batch.rows[4]};
  const int64_t n_all = int64_t(lens.size());
  std::vector<float> q_lat(size_t(H * R)), q_pe(size_t(H * ROPE));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < R; ++i) q_lat[size_t(h * R + i)] = all.q_lat[size_t((h * n_all + 4) * R + i)];
  for (int64_t i = 0; i < H * ROPE; ++i) q_pe[size_t(i)] = all.q_pe[size_t(4 * H * ROPE + i)];
  alone.q_lat = q_lat;
  alone.q_pe = q_pe;
  const std::vector<float> solo = alone.run(2);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < R; ++i)
      BOOST_TEST(solo[size_t(h * R + i)] == one[size_t((h * n_all + 4) * R + i)]);
}

BOOST_AUTO_TEST_CASE(a_lone_rows_heads_split_over_threads_keep_its_bits) {
  // Fewer chunks than threads (decode at batch 1): the heads are split into
  // parts over the threads (2 and 3 parts of H = 3 heads here, and 2 parts of
  // 2 chunks' items at 4 threads). Each row alone, at 1-4 threads: the bits
  // of the whole batch at 1 thread, which is within float32 of float64.
  const std::vector<int32_t> lens = {1, 200, int32_t(kMlaChunk) + 9};
  const Fixture all(lens);
  const std::vector<float> one = all.run(1);
  const std::vector<double> want = all.expected();
  const int64_t n_all = int64_t(lens.size());
  for (int64_t t = 0; t < n_all; ++t) {
    Fixture alone(lens);
    alone.batch.rows = {alone.batch.rows[size_t(t)]};
    alone.q_lat.assign(size_t(H * R), 0.f);
    alone.q_pe.assign(all.q_pe.begin() + t * H * ROPE, all.q_pe.begin() + (t + 1) * H * ROPE);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < R; ++i) alone.q_lat[size_t(h * R + i)] = all.q_lat[size_t((h * n_all + t) * R + i)];
    for (int threads = 1; threads <= 4; ++threads) {
      const std::vector<float> got = alone.run(threads);
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < R; ++i) {
          const size_t at = size_t((h * n_all + t) * R + i);
          BOOST_TEST(got[size_t(h * R + i)] == one[at], "row " << t << " head " << h << ", " << threads << " threads");
          BOOST_TEST(std::fabs(double(got[size_t(h * R + i)]) - want[at]) < 1e-5);
        }
    }
  }
}

BOOST_AUTO_TEST_CASE(one_chunk_rows_keep_the_head_by_head_bits) {
  // Rows of <= kMlaChunk positions: the softmax and weighted sum of the
  // head-by-head form (vector_ops softmax, then axpy in position order), bit for bit.
  const Fixture f({1, 64, 200, int32_t(kMlaChunk)});
  const std::vector<float> got = f.run(2);
  const int64_t n = f.batch.size();
  for (int64_t t = 0; t < n; ++t) {
    const TokenRow row = f.batch.rows[size_t(t)];
    for (int64_t h = 0; h < H; ++h) {
      std::vector<float> sc(size_t(row.pos + 1)), ctx(size_t(R), 0.0f);
      const float* ql = &f.q_lat[size_t((h * n + t) * R)];
      const float* qp = &f.q_pe[size_t(t * H * ROPE + h * ROPE)];
      for (int32_t j = 0; j <= row.pos; ++j) {
        const int64_t k = j % KvCache::kBlockTokens;
        sc[size_t(j)] = (dot(ql, f.cache->c_kv_block(row.slot, 0, j) + k * R, R) +
                         dot(qp, f.cache->k_pe_block(row.slot, 0, j) + k * ROPE, ROPE)) * 0.3f;
      }
      softmax(sc.data(), row.pos + 1);
      for (int32_t j = 0; j <= row.pos; ++j)
        axpy(sc[size_t(j)], f.cache->c_kv_block(row.slot, 0, j) + (j % KvCache::kBlockTokens) * R, ctx.data(), R);
      for (int64_t i = 0; i < R; ++i) BOOST_TEST(got[size_t((h * n + t) * R + i)] == ctx[size_t(i)]);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
