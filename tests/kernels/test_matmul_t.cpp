// matmul_t (y = x . W, the absorbed attention's q_lat = W_UK^T q_nope):
// reference and every path against float64; bits independent of n, of the
// thread count and of the column split.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/thread_pool.hpp"
#include "kernels/kernel_table.hpp"
#include "kernels/matmul.hpp"
#include "check_close.hpp"
#include "random_matrix.hpp"

using namespace trillion;
using namespace trillion::test;

namespace {

const std::vector<MatmulShape> kCases = {
    {MatFormat::F32, 13, 5},        {MatFormat::BF16, 7, 200},      {MatFormat::BF16, 16, 203},
    {MatFormat::FP8_B128, 300, 260}, {MatFormat::FP8_B128, 128, 512}, {MatFormat::FP8_B128, 5, 7},
    {MatFormat::INT4_G32, 7, 96},   {MatFormat::INT4_G32, 33, 64},
    // avx512's tiles: INT4 256, 128 and 32 columns (INT4 rows are whole
    // 32-column groups); the others 128, 64, 32, FP8 blocks starting inside
    // a tile, then the AVX2 kernel's 8-column and scalar tail.
    {MatFormat::INT4_G32, 128, 512}, {MatFormat::INT4_G32, 9, 224},  {MatFormat::INT8_G32, 128, 512},
    {MatFormat::INT8_G32, 7, 235},   {MatFormat::BF16, 9, 243},      {MatFormat::FP8_B128, 140, 487},
};

}  // namespace

BOOST_AUTO_TEST_CASE(matmul_t_matches_float64) {
  for (const MatmulShape& c : kCases) {
    BOOST_TEST_CONTEXT(format_name(c.format) << " " << c.rows << "x" << c.cols) {
      RandomMatrix W(c.format, c.rows, c.cols, 21);
      const int64_t n = 5;
      auto x = random_floats(n * c.rows, 22);
      std::vector<double> y64, s;
      matmul_t_f64(W, x, n, y64, s);
      std::vector<float> y(size_t(n * c.cols));
      matmul_t_ref(W.view(), x.data(), n, y.data());
      BOOST_TEST_CONTEXT("reference") { check_close(y, y64, s, c.rows); }
      for (KernelIsa isa : available_isas()) {
        std::fill(y.begin(), y.end(), 0.0f);
        kernel_table(isa).matmul_t_cols(W.view(), x.data(), n, y.data(), 0, c.cols);
        BOOST_TEST_CONTEXT(to_string(isa)) { check_close(y, y64, s, c.rows); }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(matmul_t_bits_independent_of_batch_and_split) {
  const int64_t pool_rows = 64;
  for (KernelIsa isa : available_isas()) {
    const KernelTable& k = kernel_table(isa);
    for (const MatmulShape& c : kCases) {
      BOOST_TEST_CONTEXT(to_string(isa) << " " << format_name(c.format) << " " << c.rows << "x" << c.cols) {
        RandomMatrix W(c.format, c.rows, c.cols, 23);
        auto x = random_floats(pool_rows * c.rows, 24, -2.0f, 2.0f);
        std::vector<float> alone(size_t(pool_rows * c.cols));
        for (int64_t t = 0; t < pool_rows; ++t)
          k.matmul_t_cols(W.view(), &x[size_t(t * c.rows)], 1, &alone[size_t(t * c.cols)], 0, c.cols);
        for (int64_t n : {1, 3, 17, 64}) {
          std::vector<float> y(size_t(n * c.cols));
          k.matmul_t_cols(W.view(), x.data(), n, y.data(), 0, c.cols);
          BOOST_TEST(same_bits(y.data(), alone.data(), y.size()), "n=" << n);
        }
        std::vector<float> split(size_t(3 * c.cols));
        for (int64_t c0 = 0; c0 < c.cols; c0 += 32)
          k.matmul_t_cols(W.view(), x.data(), 3, split.data(), c0, std::min(c.cols, c0 + 32));
        BOOST_TEST(same_bits(split.data(), alone.data(), split.size()));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(matmul_t_bits_independent_of_threads) {
  ThreadPool p1(1), p2(2), p3(3);
  for (const MatmulShape& c : kCases) {
    BOOST_TEST_CONTEXT(format_name(c.format) << " " << c.rows << "x" << c.cols) {
      RandomMatrix W(c.format, c.rows, c.cols, 25);
      const int64_t n = 17;
      auto x = random_floats(n * c.rows, 26);
      std::vector<float> serial(size_t(n * c.cols)), y(size_t(n * c.cols));
      matmul_t_serial(W.view(), x.data(), n, serial.data());
      for (ThreadPool* p : {&p1, &p2, &p3}) {
        std::fill(y.begin(), y.end(), -1.0f);
        matmul_t(W.view(), x.data(), n, y.data(), *p);
        BOOST_TEST(same_bits(y.data(), serial.data(), y.size()), "threads=" << p->size());
      }
    }
  }
}

// avx512's transposed INT4 product performs the AVX2 kernel's operations per
// element in the same order: the same bits, tails and column splits included.
BOOST_AUTO_TEST_CASE(matmul_t_avx512_has_the_avx2_bits) {
  with_avx2_and_avx512_tables([](const KernelTable& a2, const KernelTable& a5) {
    for (const MatmulShape& c : kCases) {
      BOOST_TEST_CONTEXT(format_name(c.format) << " " << c.rows << "x" << c.cols) {
        RandomMatrix W(c.format, c.rows, c.cols, 29);
        for (int64_t n : {1, 2, 3, 4, 7}) {
          auto x = random_floats(n * c.rows, 30 + n, -3.0f, 3.0f);
          std::vector<float> y2(size_t(n * c.cols), -1.0f), y5(size_t(n * c.cols), -2.0f);
          a2.matmul_t_cols(W.view(), x.data(), n, y2.data(), 0, c.cols);
          for (int64_t c0 = 0; c0 < c.cols; c0 += 160)  // 160: a 128-column tile, a 32-column one, then a split
            a5.matmul_t_cols(W.view(), x.data(), n, y5.data(), c0, std::min(c.cols, c0 + 160));
          BOOST_TEST(same_bits(y5.data(), y2.data(), y2.size()), "n=" << n);
        }
      }
    }
  });
}

// The absorbed attention uses matmul_t on a head's key rows of kv_b_proj.
BOOST_AUTO_TEST_CASE(matmul_t_on_a_row_range) {
  RandomMatrix W(MatFormat::FP8_B128, 300, 260, 27);
  const QMatrix sub = W.view().row_range(140, 60);
  auto x = random_floats(2 * 60, 28);
  std::vector<float> y(2 * 260), ref(2 * 260);
  matmul_t_serial(sub, x.data(), 2, y.data());
  std::vector<double> y64(2 * 260, 0.0), s(2 * 260, 0.0);
  for (int t = 0; t < 2; ++t)
    for (int64_t r = 0; r < 60; ++r)
      for (int64_t c = 0; c < 260; ++c) {
        const double p = W.value(140 + r, c) * double(x[size_t(t * 60 + r)]);
        y64[size_t(t * 260 + c)] += p;
        s[size_t(t * 260 + c)] += std::fabs(p);
      }
  check_close(y, y64, s, 60);
}
