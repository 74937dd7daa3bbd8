// Arm's BF16 dot-product step in scalar code: what one BFDOT lane, and each
// of BFMMLA's two chained steps per output, does when FEAT_EBF16 is absent
// or FPCR.EBF is 0 (the default; Arm ARM C8.2.49 BFDOT, C8.2.67 BFMMLA):
//   sum' = sum + (w_a * x_a + w_b * x_b)
// with every product, the pair's sum and the accumulation each rounded to
// odd (an inexact result gets bit 0 set; an overflow is an infinity of its
// sign), denormal inputs and results flushed to zeros of their sign (a
// result is flushed when its exact value is below the smallest normal,
// before rounding), FPCR ignored, NaN results the default NaN. The bf16
// path's Arm definition (matmul_bf16.hpp) is built from this step; the
// kernel tests hold the instruction to it under qemu (tests/kernels/
// bf16_checks.cpp).
#pragma once
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>

namespace trillion::arm_bf16 {

// Round to odd, to float, of the exact value s + e, where s is a double and
// |e| at most half of s's last place (e = 0: s is exact).
inline float round_odd(double s, double e) {
  if (std::isnan(s)) return std::bit_cast<float>(0x7FC00000u);  // the default NaN
  if (std::isinf(s) || s == 0) return float(s);                  // e is 0 here
  const bool neg = s < 0;
  const double m = std::fabs(s), up = neg ? -e : e;  // up > 0: the exact magnitude is above m
  if (m < FLT_MIN || (m == FLT_MIN && up < 0)) return neg ? -0.0f : 0.0f;  // flushed, before rounding
  // A float's 24 significant bits are a double's top 24: truncate the other
  // 29 (toward zero: the exact value's float truncation), then force bit 0
  // to 1 if anything was dropped.
  constexpr uint64_t kLow = (uint64_t(1) << 29) - 1;
  uint64_t b = std::bit_cast<uint64_t>(m);
  bool inexact = true;
  if (b & kLow) b &= ~kLow;      // s is between two floats, and so is s + e
  else if (up < 0) b -= kLow + 1;  // s is a float and the exact value just below it: the float below
  else inexact = up > 0;
  if (inexact) b |= kLow + 1;
  const double t = std::bit_cast<double>(b);
  const float f = t >= 0x1p128 ? INFINITY : float(t);  // float(t) exact: t has 24 bits
  return neg ? -f : f;
}

// An input below the smallest normal reads as a zero of its sign (FIZ).
inline float flush_in(float v) { return std::fabs(v) < FLT_MIN ? std::copysign(0.0f, v) : v; }

inline float mul(float a, float b) {
  // The product of two floats is exact in a double.
  return round_odd(double(flush_in(a)) * double(flush_in(b)), 0.0);
}

inline float add(float a, float b) {
  const double x = flush_in(a), y = flush_in(b);
  const double s = x + y;
  if (!std::isfinite(s)) return round_odd(s, 0.0);
  // Knuth's two-sum: s + e is x + y exactly.
  const double yy = s - x, e = (x - (s - yy)) + (y - yy);
  return round_odd(s, e);
}

// One step: sum + (wa * xa + wb * xb).
inline float step(float sum, float wa, float xa, float wb, float xb) {
  return add(sum, add(mul(wa, xa), mul(wb, xb)));
}

}  // namespace trillion::arm_bf16
