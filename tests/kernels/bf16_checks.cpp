#include "bf16_checks.hpp"

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>

#include "common/numeric.hpp"
#include "common/thread_pool.hpp"
#include "kernels/bf16_arm_step.hpp"
#include "kernels/matmul_bf16.hpp"
#include "random_matrix.hpp"

namespace trillion::test {

namespace {

uint32_t bits(float v) { return std::bit_cast<uint32_t>(v); }

// The same bits, or NaN in both (the x86 definition says NaN, not which one).
bool same_bits(const float* a, const float* b, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!(std::isnan(a[i]) && std::isnan(b[i])) && bits(a[i]) != bits(b[i])) return false;
  return true;
}

}  // namespace

std::vector<std::string> arm_step_by_hand() {
  using namespace arm_bf16;
  std::vector<std::string> fails;
  const auto want = [&](const char* what, float got, uint32_t expected) {
    if (bits(got) != expected) {
      char msg[160];
      std::snprintf(msg, sizeof msg, "arm_bf16 %s: got 0x%08X, want 0x%08X", what, bits(got), expected);
      fails.emplace_back(msg);
    }
  };
  // 1 + 2^-30: nearest-even gives 1.0; odd: 1 + 2^-23 (bit 0 set).
  want("1 + 2^-30", add(1.0f, 0x1p-30f), 0x3F800001);
  // 1 + 2^-24, a tie: nearest-even gives 1.0; odd: 1 + 2^-23.
  want("1 + 2^-24", add(1.0f, 0x1p-24f), 0x3F800001);
  // (1 + 2^-23) + 2^-24: nearest-even rounds up to 1 + 2^-22; odd keeps 1 + 2^-23.
  want("(1 + 2^-23) + 2^-24", add(0x1.000002p0f, 0x1p-24f), 0x3F800001);
  // 1 - 2^-30: truncated toward zero to the float below 1 (0x3F7FFFFF, odd already).
  want("1 - 2^-30", add(1.0f, -0x1p-30f), 0x3F7FFFFF);
  // 2 - 2^-30 with 2 even below it: truncated to 2 - 2^-23 = 0x3FFFFFFF.
  want("2 - 2^-30", add(2.0f, -0x1p-30f), 0x3FFFFFFF);
  // An exact sum stays: 1.5 + 0.25.
  want("1.5 + 0.25", add(1.5f, 0.25f), bits(1.75f));
  // x + (-x) is +0; -0 + -0 is -0.
  want("1 - 1", add(1.0f, -1.0f), 0x00000000);
  want("-0 + -0", add(-0.0f, -0.0f), 0x80000000);
  // Results below the smallest normal flush to zeros of their sign.
  want("FLT_MIN x 0.5", mul(FLT_MIN, 0.5f), 0x00000000);
  want("-FLT_MIN x 0.5", mul(-FLT_MIN, 0.5f), 0x80000000);
  want("1.5 FLT_MIN - FLT_MIN", add(1.5f * FLT_MIN, -FLT_MIN), 0x00000000);
  // Denormal inputs read as zeros: FLT_MIN + a subnormal is FLT_MIN.
  want("FLT_MIN + subnormal", add(FLT_MIN, FLT_MIN / 4), bits(FLT_MIN));
  // Overflow is an infinity of its sign (not the largest float, as pure round-to-odd gives).
  want("2^127 x 4", mul(0x1p127f, 4.0f), 0x7F800000);
  want("-FLT_MAX - FLT_MAX", add(-FLT_MAX, -FLT_MAX), 0xFF800000);
  // Just below overflow, inexact: FLT_MAX (odd) stays.
  want("FLT_MAX + 2^100", add(FLT_MAX, 0x1p100f), bits(FLT_MAX));
  // The default NaN.
  want("inf x 0", mul(INFINITY, 0.0f), 0x7FC00000);
  want("inf - inf", add(INFINITY, -INFINITY), 0x7FC00000);
  // A step: 0 + (1 x 1 + 1 x 2^-30) = 1 + 2^-23; products of bf16 are exact.
  want("step(0; 1 x 1, 1 x 2^-30)", step(0.0f, 1.0f, 1.0f, 1.0f, 0x1p-30f), 0x3F800001);
  // 1 + (2^-25 + 2^-25): the pair's sum is exact, and 1 + 2^-24 a tie, rounded to odd.
  want("step(1; 2^-25, 2^-25)", step(1.0f, 0x1p-25f, 1.0f, 0x1p-25f, 1.0f), 0x3F800001);
  // 2^-60 + 2^-90 (30 bits apart) is not a float: truncated, bit 0 set.
  want("2^-60 + 2^-90", add(0x1p-60f, 0x1p-90f), bits(0x1p-60f) | 1);
  return fails;
}

std::vector<std::string> bfmmla_against_step(bool& ran) {
  std::vector<std::string> fails;
  ran = kBf16Family == Bf16Family::arm && bf16_native();
  if (!ran) return fails;
  std::mt19937_64 rng(11);
  // Random bf16: all signs, exponents clustered so that sums cancel and
  // round, with some zeros, tiny and huge values, infinities.
  const auto pick = [&]() -> uint16_t {
    const uint32_t r = uint32_t(rng());
    switch (r % 16) {
      case 0: return uint16_t(r >> 16 & 0x8000);                       // a zero
      case 1: return uint16_t((r >> 16 & 0x80FF) | 0x0080);             // near FLT_MIN
      case 2: return uint16_t((r >> 16 & 0x807F) | 0x7F00);             // near 2^127
      case 3: return uint16_t(r >> 16 & 0x8000) | 0x7F80;               // an infinity
      default: return uint16_t((r >> 16 & 0x807F) | ((120 + (r >> 8) % 16) << 7));  // 2^-7 .. 2^8
    }
  };
  for (int trial = 0; trial < 20000; ++trial) {
    uint16_t n[8], m[8];
    for (auto& v : n) v = pick();
    for (auto& v : m) v = pick();
    float d[4], want[4];
    for (int i = 0; i < 4; ++i) d[i] = trial % 5 == 0 ? 0.0f : bf16_to_f32(pick()) * float(1 + (rng() % 7));
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) {
        float s = d[2 * i + j];
        const auto v = [](uint16_t h) { return bf16_to_f32(h); };
        s = arm_bf16::step(s, v(n[4 * i]), v(m[4 * j]), v(n[4 * i + 1]), v(m[4 * j + 1]));
        s = arm_bf16::step(s, v(n[4 * i + 2]), v(m[4 * j + 2]), v(n[4 * i + 3]), v(m[4 * j + 3]));
        want[2 * i + j] = s;
      }
    bfmmla_once(n, m, d);
    for (int k = 0; k < 4; ++k)
      if (bits(d[k]) != bits(want[k]) && fails.size() < 10) {
        char msg[200];
        std::snprintf(msg, sizeof msg, "BFMMLA trial %d output %d: 0x%08X, the step model 0x%08X", trial, k,
                      bits(d[k]), bits(want[k]));
        fails.emplace_back(msg);
      }
  }
  return fails;
}

std::vector<std::string> bf16_kernel_against_definition(int64_t most_tokens) {
  std::vector<std::string> fails;
  struct Case {
    int64_t rows, cols;
    std::vector<float> scales;
    float lo, hi;
    bool nan;
  };
  const std::vector<Case> cases = {
      {13, 7 * 32 + 5, {0.01f, 3.0f}, -3.0f, 3.0f, false},  // panels of 4 and one row; a partial chunk
      {7, 2 * 128, {300.0f, 1e-3f}, -1.0f, 1.0f, false},    // a scale past 2^8
      {9, 160, {1.0f}, -2.0f, 2.0f, true},                  // the NaN codes (+-480)
      {6, 96, {1.0f}, -1e-36f, 1e-36f, false},              // products and sums below FLT_MIN (flushed)
      {5, 300, {0x1p-120f, 1.0f}, -1e-10f, 1e-10f, false},  // scaled folds below FLT_MIN (kept)
      {130, 300, {0.02f, 0.7f, 5.0f}, -4.0f, 4.0f, false},  // two row blocks of scales
      {4, 1, {2.0f}, -1.0f, 1.0f, false}};                  // one column
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    const RandomMatrix W = RandomMatrix::fp8(c.rows, c.cols, 100 + k, c.scales, c.nan);
    const std::vector<float> x = random_floats(most_tokens * c.cols, 200 + k, c.lo, c.hi);
    Bf16Rows all;
    round_bf16_rows(x.data(), most_tokens, c.cols, all);
    std::vector<float> want(size_t(most_tokens * c.rows));
    matmul_bf16_ref(W.view(), all, want.data());
    const std::string shape = std::to_string(c.rows) + "x" + std::to_string(c.cols);
    ThreadPool one(1);
    for (int64_t n = 1; n <= most_tokens; ++n) {
      Bf16Rows part;
      round_bf16_rows(x.data(), n, c.cols, part);
      std::vector<float> y(size_t(n * c.rows), -1.0f);
      matmul_bf16(W.view(), part, y.data(), one);
      if (!same_bits(y.data(), want.data(), y.size()))
        fails.push_back("bf16 kernel case " + std::to_string(k) + " (" + shape + ") n=" + std::to_string(n));
      std::vector<float> serial(size_t(n * c.rows), -1.0f);
      matmul_bf16_serial(W.view(), part, serial.data(), c.rows);
      if (!same_bits(serial.data(), want.data(), serial.size()))
        fails.push_back("bf16 serial case " + std::to_string(k) + " (" + shape + ") n=" + std::to_string(n));
    }
    for (int threads = 2; threads <= 4; ++threads) {
      ThreadPool pool(threads);
      std::vector<float> y(want.size(), -1.0f);
      matmul_bf16(W.view(), all, y.data(), pool);
      if (!same_bits(y.data(), want.data(), y.size()))
        fails.push_back("bf16 kernel case " + std::to_string(k) + " (" + shape + ") threads=" + std::to_string(threads));
    }
  }
  // A view of rows (an lm_head split: QMatrix::row_range) takes its rows'
  // scales: its outputs are the whole matrix's rows, bit for bit, where a
  // 4-row panel straddles a 128-row scale block.
  {
    const RandomMatrix W = RandomMatrix::fp8(260, 200, 3, {0.5f, 2.0f, 0.03f, 7.0f});
    const int64_t n = 5, first = 126, count = 9;
    const std::vector<float> x = random_floats(n * 200, 4, -1.0f, 1.0f);
    Bf16Rows xb;
    round_bf16_rows(x.data(), n, 200, xb);
    std::vector<float> full(size_t(n * 260)), part(size_t(n * count));
    ThreadPool pool(1);
    matmul_bf16(W.view(), xb, full.data(), pool);
    matmul_bf16(W.view().row_range(first, count), xb, part.data(), pool);
    for (int64_t t = 0; t < n; ++t)
      if (std::memcmp(&part[size_t(t * count)], &full[size_t(t * 260 + first)], size_t(count) * 4) != 0)
        fails.push_back("bf16 row view rows 126..134, token " + std::to_string(t));
  }
  return fails;
}

}  // namespace trillion::test
