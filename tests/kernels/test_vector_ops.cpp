// Norms, activations, softmax, dot/axpy against float64 with stated bounds.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "common/numeric.hpp"
#include "exp_checks.hpp"
#include "kernel_checks.hpp"
#include "kernels/expf.hpp"
#include "kernels/kernel_table.hpp"
#include "kernels/vector_ops.hpp"
#include "random_matrix.hpp"

using namespace trillion;
using namespace trillion::test;

namespace {
const double u = std::ldexp(1.0, -24);
}

BOOST_AUTO_TEST_CASE(rmsnorm_matches_float64) {
  for (int64_t n : {1, 7, 200, 7168}) {
    auto x = random_floats(n, 31, -3.0f, 3.0f);
    auto wf = random_floats(n, 32, 0.5f, 1.5f);
    std::vector<uint16_t> wb(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) wb[size_t(i)] = f32_to_bf16(wf[size_t(i)]);
    for (bool bf16 : {false, true}) {
      BOOST_TEST_CONTEXT("n=" << n << (bf16 ? " bf16" : " f32")) {
        VecView w{bf16 ? DType::BF16 : DType::F32, bf16 ? static_cast<const void*>(wb.data()) : wf.data(), n};
        std::vector<float> out(static_cast<size_t>(n));
        rmsnorm(x.data(), w, 1e-6, out.data());
        double ss = 0;
        for (float v : x) ss += double(v) * v;
        const double r = 1.0 / std::sqrt(ss / double(n) + 1e-6);
        for (int64_t i = 0; i < n; ++i) {
          const double want = double(x[size_t(i)]) * r * double(w[i]);
          // r rounded once, then two float products: <= 4u relative.
          BOOST_TEST(std::fabs(out[size_t(i)] - want) <= 4 * u * std::fabs(want) + 1e-30);
        }
        // In place gives the same bits.
        std::vector<float> inplace = x;
        rmsnorm(inplace.data(), w, 1e-6, inplace.data());
        BOOST_TEST(inplace == out);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(activations_match_float64) {
  for (float v : {-30.0f, -5.5f, -1.0f, -0.1f, 0.0f, 0.3f, 2.0f, 9.0f, 40.0f}) {
    const double s = 1.0 / (1.0 + std::exp(-double(v)));
    BOOST_TEST(std::fabs(sigmoid(v) - s) <= 8 * u * s);
    BOOST_TEST(std::fabs(silu(v) - double(v) * s) <= 8 * u * std::fabs(double(v) * s) + 1e-30);
  }
  auto g = random_floats(37, 33, -6.0f, 6.0f), up = random_floats(37, 34);
  std::vector<float> out(37);
  swiglu(g.data(), up.data(), 37, out.data());
  for (size_t i = 0; i < 37; ++i) {
    const double want = double(g[i]) / (1.0 + std::exp(-double(g[i]))) * up[i];
    BOOST_TEST(std::fabs(out[i] - want) <= 10 * u * std::fabs(want) + 1e-30);
  }
  // The vectorized swiglu has the bits of silu(g) * up, element by element,
  // across its blocks and in place.
  auto g2 = random_floats(1000, 38, -100.0f, 100.0f), up2 = random_floats(1000, 40);
  std::vector<float> out2 = g2;
  swiglu(out2.data(), up2.data(), 1000, out2.data());
  for (size_t i = 0; i < 1000; ++i) {
    const float want = silu(g2[i]) * up2[i];
    BOOST_TEST(same_bits(&out2[i], &want, 1), "i=" << i);
  }
  // sigmoid_each has sigmoid's bits, across its blocks (600 > one block),
  // over the range where it rounds to neither 0 nor 1, and at the edges.
  auto s = random_floats(600, 41, -100.0f, 100.0f);
  for (float v : {0.0f, -0.0f, 88.7f, -88.7f, -104.0f, 1e-30f, std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity()})
    s.push_back(v);
  std::vector<float> sig = s;
  sigmoid_each(sig.data(), int64_t(sig.size()));
  for (size_t i = 0; i < s.size(); ++i) {
    const float want = sigmoid(s[i]);
    BOOST_TEST(same_bits(&sig[i], &want, 1), "x=" << s[i]);
  }
}

// exp_f32 (glibc's expf algorithm) and every path's vectorized exp, over
// every 4093rd float bit pattern and the special cases' edges.
constexpr uint32_t kExpStride = 4093;

BOOST_AUTO_TEST_CASE(exp_f32_within_an_ulp_of_float64) {
  const std::string misses = exp_accuracy_misses(kExpStride);
  BOOST_TEST(misses.empty(), misses);
}

BOOST_AUTO_TEST_CASE(exp_every_path_has_exp_f32s_bits) {
  for (KernelIsa isa : kAllKernelIsas) {
    if (!kernel_isa_available(isa)) continue;
    const std::string misses = exp_path_misses(isa, kExpStride);
    BOOST_TEST(misses.empty(), misses);
  }
}

// Where std::exp is the computation exp_f32 follows (glibc's FMA build),
// the two agree bit for bit; elsewhere there is nothing to compare with, and
// the test says so (the accuracy test above still holds exp_f32 to float64).
BOOST_AUTO_TEST_CASE(exp_f32_is_glibcs_expf) {
  std::string why_not;
  if (!libm_expf_is_glibc_fma(why_not)) {
    BOOST_TEST_MESSAGE("exp_f32 vs std::exp not compared: " << why_not);
    return;
  }
  const std::string misses = exp_libm_misses(kExpStride);
  BOOST_TEST(misses.empty(), misses);
}

// The same three over all 2^32 floats (a few minutes; not in the suite):
// build/tests/test_kernels --run_test=exp_on_every_float
BOOST_AUTO_TEST_CASE(exp_on_every_float, *boost::unit_test::disabled()) {
  BOOST_TEST(exp_accuracy_misses(1).empty());
  for (KernelIsa isa : kAllKernelIsas)
    if (kernel_isa_available(isa)) BOOST_TEST(exp_path_misses(isa, 1).empty(), to_string(isa));
  std::string why_not;
  if (libm_expf_is_glibc_fma(why_not)) BOOST_TEST(exp_libm_misses(1).empty());
  else BOOST_TEST_MESSAGE("exp_f32 vs std::exp not compared: " << why_not);
}

// A row's bits are softmax_stats' whether it goes alone or among others.
BOOST_AUTO_TEST_CASE(softmax_rows_have_softmax_stats_bits) {
  for (int64_t n : {1, 2, 9, 33, 300}) {
    const int64_t rows = 7, ld = n + 5;
    auto x = random_floats(rows * ld, 39, -30.0f, 30.0f);
    std::vector<float> one = x, max(rows);
    std::vector<double> sum(rows);
    softmax_stats_rows(x.data(), ld, rows, n, max.data(), sum.data());
    for (int64_t r = 0; r < rows; ++r) {
      float m1;
      double s1;
      softmax_stats(&one[size_t(r * ld)], n, m1, s1);
      BOOST_TEST_CONTEXT("n=" << n << " row " << r) {
        BOOST_TEST(m1 == max[size_t(r)]);
        BOOST_TEST(s1 == sum[size_t(r)]);
        for (int64_t i = 0; i < ld; ++i) BOOST_TEST(same_bits(&one[size_t(r * ld + i)], &x[size_t(r * ld + i)], 1));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(softmax_matches_float64) {
  for (int64_t n : {1, 2, 9, 300}) {
    auto x = random_floats(n, 35, -20.0f, 20.0f);
    std::vector<double> want(static_cast<size_t>(n));
    double mx = -1e300, sum = 0;
    for (float v : x) mx = std::max(mx, double(v));
    for (int64_t i = 0; i < n; ++i) sum += want[size_t(i)] = std::exp(double(x[size_t(i)]) - mx);
    softmax(x.data(), n);
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
      want[size_t(i)] /= sum;
      total += x[size_t(i)];
      // exp of a rounded difference: the error of x - max (<= u |x - max|) dominates.
      BOOST_TEST(std::fabs(x[size_t(i)] - want[size_t(i)]) <= (8 + 40) * u * want[size_t(i)] + 1e-30);
    }
    BOOST_TEST(std::fabs(total - 1.0) <= 1e-6);
  }
}

BOOST_AUTO_TEST_CASE(dot_and_axpy_every_path) {
  for (KernelIsa isa : kAllKernelIsas) {
    if (!kernel_isa_available(isa)) continue;
    const KernelTable& k = kernel_table(isa);
    for (int64_t n : {0, 1, 7, 8, 15, 16, 24, 64, 512, 517}) {
      BOOST_TEST_CONTEXT(to_string(isa) << " n=" << n) {
        auto a = random_floats(n, 36), b = random_floats(n, 37);
        double want = 0, s = 0;
        for (int64_t i = 0; i < n; ++i) want += double(a[size_t(i)]) * b[size_t(i)], s += std::fabs(double(a[size_t(i)]) * b[size_t(i)]);
        BOOST_TEST(std::fabs(k.dot(a.data(), b.data(), n) - want) <= double(n + 2) * u * s + 1e-30);
        std::vector<float> y = b;
        k.axpy(0.37f, a.data(), y.data(), n);
        for (int64_t i = 0; i < n; ++i) {
          const double w = double(b[size_t(i)]) + 0.37 * double(a[size_t(i)]);
          BOOST_TEST(std::fabs(y[size_t(i)] - w) <= 3 * u * (std::fabs(b[size_t(i)]) + std::fabs(0.37 * a[size_t(i)])));
        }
      }
    }
  }
}

// The tiles are defined as loops over the same table's dot / axpy: the bits
// must be those, for every shape (tile edges: AVX2 3x4 dots and 4 rows x 24
// columns, AVX-512 4x6 dots and 6 rows x 64 columns, NEON 3x4 and 4 x 16),
// stride and length (dot's 16/8/tail steps, axpy's vector and tail columns).
BOOST_AUTO_TEST_CASE(dot_and_axpy_tiles_have_the_loops_bits) {
  for (KernelIsa isa : kAllKernelIsas) {
    if (!kernel_isa_available(isa)) continue;
    const KernelTable& k = kernel_table(isa);
    for (int64_t n : {1, 8, 15, 16, 24, 40, 64, 100, 120, 517}) {
      for (auto [na, nb] :
           {std::pair<int64_t, int64_t>{1, 1}, {2, 3}, {3, 5}, {5, 7}, {16, 64}, {7, 2}, {6, 6}, {9, 13}, {11, 17}}) {
        BOOST_TEST_CONTEXT(to_string(isa) << " n=" << n << " na=" << na << " nb=" << nb) {
          const int64_t lda = n + 3, ldb = n + 5, ldo = nb + 2;
          auto a = random_floats(na * lda, 41), b = random_floats(nb * ldb, 42);
          std::vector<float> got(size_t(na * ldo), -7.0f), want = got;
          k.dot_tile(a.data(), lda, na, b.data(), ldb, nb, n, got.data(), ldo, nb > 1 ? &b[size_t(ldb)] : nullptr);
          for (int64_t i = 0; i < na; ++i)
            for (int64_t j = 0; j < nb; ++j) want[size_t(i * ldo + j)] = k.dot(&a[size_t(i * lda)], &b[size_t(j * ldb)], n);
          BOOST_TEST(got == want, boost::test_tools::per_element());  // padding untouched too

          const int64_t ldp = nb + 1, ldx = n + 1, ldy = n + 4;
          auto p = random_floats(na * ldp, 43), x = random_floats(nb * ldx, 44);
          std::vector<float> y = random_floats(na * ldy, 45), y_want = y;
          k.axpy_tile(p.data(), ldp, na, x.data(), ldx, nb, y.data(), ldy, n);
          for (int64_t i = 0; i < na; ++i)
            for (int64_t j = 0; j < nb; ++j) k.axpy(p[size_t(i * ldp + j)], &x[size_t(j * ldx)], &y_want[size_t(i * ldy)], n);
          BOOST_TEST(y == y_want, boost::test_tools::per_element());
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(add_is_elementwise) {
  std::vector<float> y = {1, 2, 3}, x = {0.5f, -2, 4};
  add(y.data(), x.data(), 3);
  BOOST_TEST(y == (std::vector<float>{1.5f, 0, 7}), boost::test_tools::per_element());
}
