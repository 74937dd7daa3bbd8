// The bf16 path for FP8 weights (kernels/matmul_bf16.hpp): the rounding by
// hand, Arm's step by hand, both families' scalar definitions against
// float64 sums of their operands, and the build's native kernel (AVX-512
// BF16 here; BFMMLA in the arm64 self test under qemu) bit for bit against
// its definition (bf16_checks.hpp).
#include <boost/test/unit_test.hpp>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/numeric.hpp"
#include "common/thread_pool.hpp"
#include "kernels/matmul_bf16.hpp"
#include "bf16_checks.hpp"
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

BOOST_AUTO_TEST_CASE(arm_step_by_hand) {
  for (const std::string& f : trillion::test::arm_step_by_hand()) BOOST_ERROR(f);
}

// Each family's scalar definition is the float64 sum of its operands (x
// rounded, w exact, times the block scale) within the error of its
// roundings: x86, 2 per lane and chunk, one per block (the scaled fold) and
// the 4-level tree (each half an ulp); Arm, 2 per step (the pair's sum and
// the accumulation, each under an ulp: rounding to odd), 8 steps per lane
// and block, then the lanes' 3 sums and the fold.
BOOST_AUTO_TEST_CASE(definitions_against_float64) {
  for (Bf16Family family : {Bf16Family::x86, Bf16Family::arm})
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{5, 300}, {3, 1000}, {2, 31}}) {
      const RandomMatrix W = RandomMatrix::fp8(rows, cols, 7 + cols, {0.01f, 3.0f, 0.5f});
      const int64_t n = 3;
      const std::vector<float> x = random_x(n, cols, 8, -2.0f, 2.0f);
      Bf16Rows xb;
      round_bf16_rows(x.data(), n, cols, xb);
      std::vector<float> y(size_t(n * rows));
      matmul_bf16_ref(W.view(), xb, y.data(), family);
      const double blocks = double((cols + 127) / 128);
      const double bound_ulps = family == Bf16Family::x86 ? (2 * ((cols + 31) / 32) + blocks + 4) * 0x1p-24
                                                          : (2 * 2 * 8 + 4) * blocks * 0x1p-23;
      for (int64_t t = 0; t < n; ++t)
        for (int64_t r = 0; r < rows; ++r) {
          double exact = 0, mag = 0;
          for (int64_t c = 0; c < cols; ++c) {
            const double p = W.value(r, c) * double(bf16_to_f32(bf16_round(x[size_t(t * cols + c)])));
            exact += p, mag += std::fabs(p);
          }
          BOOST_TEST(std::fabs(double(y[size_t(t * rows + r)]) - exact) <= bound_ulps * mag + 1e-30,
                     to_string(family) << " rows " << rows << " cols " << cols << " t " << t << " r " << r);
        }
    }
}

// The two families differ (in the last bits, where a sum rounds): the same
// operands through each give different bits somewhere.
BOOST_AUTO_TEST_CASE(families_differ) {
  const RandomMatrix W = RandomMatrix::fp8(16, 512, 5, {0.3f, 1.7f});
  const std::vector<float> x = random_x(4, 512, 6, -2.0f, 2.0f);
  Bf16Rows xb;
  round_bf16_rows(x.data(), 4, 512, xb);
  std::vector<float> a(64), b(64);
  matmul_bf16_ref(W.view(), xb, a.data(), Bf16Family::x86);
  matmul_bf16_ref(W.view(), xb, b.data(), Bf16Family::arm);
  BOOST_TEST(!same_bits(a, b));
}

// The build's native kernel bit for bit against its definition; a token's
// outputs are its own whatever the batch (n = 1 against every n), any thread
// count, row views.
BOOST_AUTO_TEST_CASE(native_kernel_bits) {
  BOOST_TEST_MESSAGE("bf16 path: " << to_string(kBf16Family) << " definition, "
                                   << (bf16_native() ? "native" : "scalar (nothing native to compare)"));
  for (const std::string& f : trillion::test::bf16_kernel_against_definition(40)) BOOST_ERROR(f);
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
