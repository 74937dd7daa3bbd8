// matmul for every format: scalar reference and every available path against
// float64, and the determinism contract (bits independent of n, of the other
// rows of x, of the thread count and of the row split).
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <vector>

#include "common/error.hpp"
#include "common/thread_pool.hpp"
#include "kernels/kernel_table.hpp"
#include "kernels/matmul.hpp"
#include "check_close.hpp"
#include "random_matrix.hpp"

using namespace trillion;
using namespace trillion::test;

BOOST_AUTO_TEST_CASE(reference_matches_float64) {
  for (const MatmulShape& c : kMatmulShapes) {
    BOOST_TEST_CONTEXT(format_name(c.format) << " " << c.rows << "x" << c.cols) {
      RandomMatrix W(c.format, c.rows, c.cols, 1);
      const int64_t n = 3;
      auto x = random_floats(n * c.cols, 2);
      std::vector<double> y64, s;
      matmul_f64(W, x, n, y64, s);
      std::vector<float> y(size_t(n * c.rows));
      matmul_ref(W.view(), x.data(), n, y.data());
      check_close(y, y64, s, c.cols);
    }
  }
}

BOOST_AUTO_TEST_CASE(every_path_matches_float64) {
  for (KernelIsa isa : available_isas())
    for (const MatmulShape& c : kMatmulShapes) {
      BOOST_TEST_CONTEXT(to_string(isa) << " " << format_name(c.format) << " " << c.rows << "x" << c.cols) {
        RandomMatrix W(c.format, c.rows, c.cols, 3);
        // 1, 2: decode's tiles; 5: a full token tile and a partial one; 70:
        // past the AVX2 blocked path's thresholds and its 64-token blocks.
        for (int64_t n : {1, 2, 5, 70}) {
          auto x = random_floats(n * c.cols, 4);
          std::vector<double> y64, s;
          matmul_f64(W, x, n, y64, s);
          std::vector<float> y(size_t(n * c.rows));
          kernel_table(isa).matmul_rows(W.view(), x.data(), n, y.data(), c.rows, 0, c.rows);
          BOOST_TEST_CONTEXT("n=" << n) check_close(y, y64, s, c.cols);
        }
      }
    }
}

// avx512's INT4 rows product at n <= 3 (matmul_int4_avx512.cpp) performs the
// AVX2 tile's operations per element: the same bits, on every row split.
BOOST_AUTO_TEST_CASE(avx512_rows_have_the_avx2_bits) {
  with_avx2_and_avx512_tables([](const KernelTable& a2, const KernelTable& a5) {
    for (const MatmulShape& c : kMatmulShapes) {
      BOOST_TEST_CONTEXT(format_name(c.format) << " " << c.rows << "x" << c.cols) {
        RandomMatrix W(c.format, c.rows, c.cols, 5);
        for (int64_t n : {1, 2, 3, 4}) {
          auto x = random_floats(n * c.cols, 6 + n, -3.0f, 3.0f);
          std::vector<float> y2(size_t(n * c.rows), -1.0f), y5(size_t(n * c.rows), -2.0f);
          a2.matmul_rows(W.view(), x.data(), n, y2.data(), c.rows, 0, c.rows);
          for (int64_t r0 = 0; r0 < c.rows; r0 += 37)  // uneven splits: other tiles, other leftover rows
            a5.matmul_rows(W.view(), x.data(), n, y5.data(), c.rows, r0, std::min(c.rows, r0 + 37));
          BOOST_TEST(same_bits(y5.data(), y2.data(), y2.size()), "n=" << n);
        }
      }
    }
  });
}

BOOST_AUTO_TEST_CASE(active_path_is_reported) {
  BOOST_TEST_MESSAGE("kernel path: " << to_string(kernel_isa()));
  BOOST_TEST(kernel_isa_available(kernel_isa()));
  BOOST_TEST(kernel_isa_available(KernelIsa::portable));
}

// Each token computed alone is the truth; in a batch of any size, at any
// offset among other tokens, it must come out with the same bits.
BOOST_AUTO_TEST_CASE(bits_independent_of_batch) {
  const int64_t pool_rows = 140;
  for (KernelIsa isa : available_isas())
    for (const MatmulShape& c : kMatmulShapes) {
      BOOST_TEST_CONTEXT(to_string(isa) << " " << format_name(c.format) << " " << c.rows << "x" << c.cols) {
        const KernelTable& k = kernel_table(isa);
        RandomMatrix W(c.format, c.rows, c.cols, 5);
        const QMatrix Wv = W.view();
        auto x = random_floats(pool_rows * c.cols, 6, -2.0f, 2.0f);
        std::vector<float> alone(size_t(pool_rows * c.rows));
        for (int64_t t = 0; t < pool_rows; ++t)
          k.matmul_rows(Wv, &x[size_t(t * c.cols)], 1, &alone[size_t(t * c.rows)], c.rows, 0, c.rows);
        for (int64_t n : {1, 2, 3, 4, 5, 8, 9, 17, 24, 50, 64, 130})
          for (int64_t offset : {int64_t(0), int64_t(5)}) {
            std::vector<float> y(size_t(n * c.rows));
            k.matmul_rows(Wv, &x[size_t(offset * c.cols)], n, y.data(), c.rows, 0, c.rows);
            BOOST_TEST(same_bits(y.data(), &alone[size_t(offset * c.rows)], y.size()), "n=" << n << " offset=" << offset);
          }
        // Any split of the rows (as threads make) gives the same bits.
        for (int64_t n : {5, 17}) {  // the direct path, and the blocked one for FP8 and INT4
          std::vector<float> split(size_t(n * c.rows));
          for (int64_t r0 = 0; r0 < c.rows;) {
            const int64_t r1 = std::min(c.rows, r0 + 1 + (r0 * 7) % 5);
            k.matmul_rows(Wv, x.data(), n, split.data(), c.rows, r0, r1);
            r0 = r1;
          }
          BOOST_TEST(same_bits(split.data(), alone.data(), split.size()), "n=" << n);
        }
      }
    }
}

BOOST_AUTO_TEST_CASE(bits_independent_of_threads) {
  ThreadPool p1(1), p2(2), p3(3);
  for (const MatmulShape& c : kMatmulShapes) {
    BOOST_TEST_CONTEXT(format_name(c.format) << " " << c.rows << "x" << c.cols) {
      RandomMatrix W(c.format, c.rows, c.cols, 7);
      const int64_t n = 17;
      auto x = random_floats(n * c.cols, 8);
      std::vector<float> serial(size_t(n * c.rows)), y(size_t(n * c.rows));
      matmul_serial(W.view(), x.data(), n, serial.data(), c.rows);
      for (ThreadPool* p : {&p1, &p2, &p3}) {
        std::fill(y.begin(), y.end(), -1.0f);
        matmul(W.view(), x.data(), n, y.data(), *p);
        BOOST_TEST(same_bits(y.data(), serial.data(), y.size()), "threads=" << p->size());
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(strided_output) {
  RandomMatrix W(MatFormat::BF16, 7, 200, 9);
  auto x = random_floats(3 * 200, 10);
  std::vector<float> dense(3 * 7), wide(3 * 20, 42.0f);
  matmul_serial(W.view(), x.data(), 3, dense.data(), 7);
  matmul_serial(W.view(), x.data(), 3, wide.data() + 4, 20);
  for (int t = 0; t < 3; ++t) {
    BOOST_TEST(same_bits(&wide[size_t(t * 20 + 4)], &dense[size_t(t * 7)], 7));
    BOOST_TEST(wide[size_t(t * 20)] == 42.0f);
    BOOST_TEST(wide[size_t(t * 20 + 11)] == 42.0f);
  }
}

BOOST_AUTO_TEST_CASE(row_range_is_a_slice) {
  const struct { MatFormat f; int64_t rows, cols, r0, n; } cases[] = {
      {MatFormat::FP8_B128, 300, 260, 130, 100}, {MatFormat::FP8_B128, 300, 260, 0, 300},
      {MatFormat::INT4_G32, 40, 96, 3, 4},       {MatFormat::BF16, 7, 200, 6, 1},
      {MatFormat::F32, 5, 13, 2, 3}};
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(format_name(c.f) << " rows " << c.r0 << "+" << c.n) {
      RandomMatrix W(c.f, c.rows, c.cols, 11);
      auto x = random_floats(2 * c.cols, 12);
      std::vector<float> full(size_t(2 * c.rows)), part(size_t(2 * c.n));
      matmul_serial(W.view(), x.data(), 2, full.data(), c.rows);
      const QMatrix sub = W.view().row_range(c.r0, c.n);
      matmul_serial(sub, x.data(), 2, part.data(), c.n);
      for (int t = 0; t < 2; ++t)
        BOOST_TEST(same_bits(&part[size_t(t * c.n)], &full[size_t(t * c.rows + c.r0)], size_t(c.n)));
      // The reference agrees that the slice holds the same weights.
      std::vector<float> ref_full(size_t(2 * c.rows)), ref_part(size_t(2 * c.n));
      matmul_ref(W.view(), x.data(), 2, ref_full.data());
      matmul_ref(sub, x.data(), 2, ref_part.data());
      for (int t = 0; t < 2; ++t)
        BOOST_TEST(same_bits(&ref_part[size_t(t * c.n)], &ref_full[size_t(t * c.rows + c.r0)], size_t(c.n)));
    }
  }
  RandomMatrix W(MatFormat::BF16, 7, 200, 13);
  BOOST_CHECK_THROW(W.view().row_range(5, 3), Error);
  BOOST_CHECK_THROW(W.view().row_range(-1, 2), Error);
}

BOOST_AUTO_TEST_CASE(bad_matrices_are_refused) {
  RandomMatrix W(MatFormat::INT4_G32, 4, 64, 14);
  QMatrix bad = W.view();
  bad.cols = 48;
  std::vector<float> x(64), y(4);
  BOOST_CHECK_THROW(matmul_serial(bad, x.data(), 1, y.data(), 4), Error);
  RandomMatrix F(MatFormat::FP8_B128, 4, 64, 15);
  QMatrix no_scale = F.view();
  no_scale.scale = nullptr;
  BOOST_CHECK_THROW(matmul_serial(no_scale, x.data(), 1, y.data(), 4), Error);
}

BOOST_AUTO_TEST_CASE(zero_tokens_and_empty_matrices) {
  RandomMatrix W(MatFormat::BF16, 7, 200, 16);
  ThreadPool pool(2);
  matmul(W.view(), nullptr, 0, nullptr, pool);  // n = 0: nothing to do
  RandomMatrix E(MatFormat::F32, 3, 0, 17);
  std::vector<float> y(3, 1.0f);
  matmul_serial(E.view(), nullptr, 1, y.data(), 3);
  BOOST_TEST(y[0] == 0.0f);
  BOOST_TEST(y[2] == 0.0f);
}
