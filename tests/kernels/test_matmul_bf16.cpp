// The bf16 path for FP8 weights (kernels/matmul_bf16.hpp): the rounding by
// hand, the scalar definition against float64 sums of its operands,
// and the AVX-512 BF16 kernel bit for bit against the scalar definition
// (odd shapes, partial chunks, every token count to 40, thread counts,
// scales past 2^8 and near 2^-120, the NaN codes, products and sums below the
// smallest normal, row views whose 4-row panels straddle a scale block).
#include <boost/test/unit_test.hpp>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/numeric.hpp"
#include "common/thread_pool.hpp"
#include "kernels/matmul_bf16.hpp"
#include "random_matrix.hpp"

using namespace trillion;
using trillion::test::RandomMatrix;

namespace {

std::vector<float> random_x(int64_t n, int64_t cols, uint64_t seed, float lo, float hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> x(size_t(n * cols));
  for (auto& v : x) v = u(rng);
  return x;
}

// The same bits, or NaN in both (the definition says NaN, not which one).
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(std::isnan(a[i]) && std::isnan(b[i])) && std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return false;
  return true;
}

}  // namespace

BOOST_AUTO_TEST_CASE(bf16_rounding_by_hand) {
  BOOST_TEST(bf16_round(1.0f) == 0x3F80);
  BOOST_TEST(bf16_round(1.0f + 0x1p-8f) == 0x3F80);         // a tie: to the even neighbour (1.0)
  BOOST_TEST(bf16_round(1.0f + 3 * 0x1p-8f) == 0x3F82);     // a tie: to the even neighbour (1 + 2^-6)
  BOOST_TEST(bf16_round(1.0f + 0x1p-8f + 0x1p-20f) == 0x3F81);  // past the tie: up
  BOOST_TEST(bf16_round(FLT_MIN / 2) == 0x0000);            // subnormal: a zero of its sign
  BOOST_TEST(bf16_round(-FLT_MIN / 2) == 0x8000);
  BOOST_TEST(bf16_round(FLT_MAX) == 0x7F80);                // rounds up to infinity
  BOOST_TEST(std::isnan(bf16_to_f32(bf16_round(std::nanf("")))));
  // e4m3 bytes: 0x38 = 1.0, 0x01 = 2^-9 (subnormal), 0xFE = -448; the NaN
  // codes 0x7F, 0xFF read as +-480 (as the f32 path reads them); every other byte exactly.
  BOOST_TEST(bf16_weight(0x38) == 0x3F80);
  BOOST_TEST(bf16_to_f32(bf16_weight(0x01)) == 0x1p-9f);
  BOOST_TEST(bf16_to_f32(bf16_weight(0xFE)) == -448.0f);
  BOOST_TEST(bf16_to_f32(bf16_weight(0x7F)) == 480.0f);
  BOOST_TEST(bf16_to_f32(bf16_weight(0xFF)) == -480.0f);
  for (int b = 0; b < 256; ++b)
    if ((b & 0x7F) != 0x7F) BOOST_TEST(bf16_to_f32(bf16_weight(uint8_t(b))) == fp8e4m3_to_f32(uint8_t(b)), "byte " << b);
}

// The scalar definition is the float64 sum of its operands (x rounded, w
// exact, times the block scale) within the error of 2 float32 additions per
// lane and chunk, one per block (the scaled fold) and the 4-level tree.
BOOST_AUTO_TEST_CASE(definition_against_float64) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{5, 300}, {3, 1000}, {2, 31}}) {
    const RandomMatrix W = RandomMatrix::fp8(rows, cols, 7 + cols, {0.01f, 3.0f, 0.5f});
    const int64_t n = 3;
    const std::vector<float> x = random_x(n, cols, 8, -2.0f, 2.0f);
    Bf16Rows xb;
    round_bf16_rows(x.data(), n, cols, xb);
    std::vector<float> y(size_t(n * rows));
    matmul_bf16_ref(W.view(), xb, y.data());
    for (int64_t t = 0; t < n; ++t)
      for (int64_t r = 0; r < rows; ++r) {
        double exact = 0, mag = 0;
        for (int64_t c = 0; c < cols; ++c) {
          const double p = W.value(r, c) * double(bf16_to_f32(bf16_round(x[size_t(t * cols + c)])));
          exact += p, mag += std::fabs(p);
        }
        const double bound = double(2 * ((cols + 31) / 32) + (cols + 127) / 128 + 4) * 0x1p-24 * mag + 1e-30;
        BOOST_TEST(std::fabs(double(y[size_t(t * rows + r)]) - exact) <= bound,
                   "rows " << rows << " cols " << cols << " t " << t << " r " << r);
      }
  }
}

// AVX-512 BF16 bit for bit against the definition; a token's outputs are its
// own whatever the batch (n = 1 against every n), any thread count.
BOOST_AUTO_TEST_CASE(native_kernel_bits) {
  if (!bf16_native()) {
    BOOST_TEST_MESSAGE("no AVX-512 BF16 on this CPU: matmul_bf16 runs the scalar definition (tested above)");
    return;
  }
  struct Case {
    int64_t rows, cols;
    std::vector<float> scales;
    float lo, hi;
    bool nan;
  };
  const std::vector<Case> cases = {
      {13, 7 * 32 + 5, {0.01f, 3.0f}, -3.0f, 3.0f, false},       // panels of 4 and one row; a partial chunk
      {7, 2 * 128, {300.0f, 1e-3f}, -1.0f, 1.0f, false},         // a scale past 2^8
      {9, 160, {1.0f}, -2.0f, 2.0f, true},                       // the NaN codes (+-480)
      {6, 96, {1.0f}, -1e-36f, 1e-36f, false},                   // products and sums below FLT_MIN (flushed)
      {5, 300, {0x1p-120f, 1.0f}, -1e-10f, 1e-10f, false},       // scaled folds below FLT_MIN (kept)
      {130, 300, {0.02f, 0.7f, 5.0f}, -4.0f, 4.0f, false},       // two row blocks of scales
      {4, 1, {2.0f}, -1.0f, 1.0f, false}};                       // one column
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    const RandomMatrix W = RandomMatrix::fp8(c.rows, c.cols, 100 + k, c.scales, c.nan);
    const int64_t most = 40;
    const std::vector<float> x = random_x(most, c.cols, 200 + k, c.lo, c.hi);
    Bf16Rows all;
    round_bf16_rows(x.data(), most, c.cols, all);
    std::vector<float> want(size_t(most * c.rows));
    matmul_bf16_ref(W.view(), all, want.data());
    ThreadPool one(1);
    for (int64_t n = 1; n <= most; ++n) {
      Bf16Rows part;
      round_bf16_rows(x.data(), n, c.cols, part);
      std::vector<float> y(size_t(n * c.rows), -1.0f);
      matmul_bf16(W.view(), part, y.data(), one);
      const std::vector<float> head(want.begin(), want.begin() + n * c.rows);
      BOOST_TEST(same_bits(y, head), "case " << k << " (" << c.rows << "x" << c.cols << ") n=" << n);
    }
    for (int threads = 2; threads <= 4; ++threads) {
      ThreadPool pool(threads);
      std::vector<float> y(want.size(), -1.0f);
      matmul_bf16(W.view(), all, y.data(), pool);
      BOOST_TEST(same_bits(y, want), "case " << k << " threads=" << threads);
    }
  }
}

// A view of rows (an lm_head split: QMatrix::row_range) takes its rows'
// scales: its outputs are the whole matrix's rows, bit for bit, where a
// 4-row panel straddles a 128-row scale block.
BOOST_AUTO_TEST_CASE(row_views_take_their_rows_scales) {
  const RandomMatrix W = RandomMatrix::fp8(260, 200, 3, {0.5f, 2.0f, 0.03f, 7.0f});
  const int64_t n = 5, first = 126, count = 9;
  const std::vector<float> x = random_x(n, 200, 4, -1.0f, 1.0f);
  Bf16Rows xb;
  round_bf16_rows(x.data(), n, 200, xb);
  std::vector<float> full(size_t(n * 260)), part(size_t(n * count));
  ThreadPool pool(1);
  matmul_bf16(W.view(), xb, full.data(), pool);
  matmul_bf16(W.view().row_range(first, count), xb, part.data(), pool);
  for (int64_t t = 0; t < n; ++t)
    BOOST_TEST(std::memcmp(&part[size_t(t * count)], &full[size_t(t * 260 + first)], size_t(count) * 4) == 0,
               "token " << t);
}

BOOST_AUTO_TEST_CASE(refuses_other_formats_and_shapes) {
  const RandomMatrix W = RandomMatrix::fp8(4, 64, 1, {1.0f});
  Bf16Rows xb;
  const std::vector<float> x(64, 1.0f);
  round_bf16_rows(x.data(), 1, 48, xb);
  std::vector<float> y(4);
  ThreadPool pool(1);
  BOOST_CHECK_THROW(matmul_bf16(W.view(), xb, y.data(), pool), std::exception);  // 48 columns against 64
  QMatrix f = W.view();
  f.format = MatFormat::BF16;
  round_bf16_rows(x.data(), 1, 64, xb);
  BOOST_CHECK_THROW(matmul_bf16(f, xb, y.data(), pool), std::exception);  // not FP8
  BOOST_TEST(!bf16_supports(MatFormat::INT8_G32));
  BOOST_TEST(bf16_supports(MatFormat::FP8_B128));
}
