#include "kernels/expf.hpp"

#include <cmath>
#include <cstring>

namespace trillion {

namespace {

uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// glibc's handling of |x| >= 88 (e_expf.c): -inf gives 0, +inf and NaN
// themselves (x + x), overflow above ~88.72 (+inf), underflow to 0 below
// ~-103.97, and between -103.97 and -103.28 its "may underflow" result (the
// float square of 0x1.4p-75, which rounds to the least subnormal). Anything
// else (|x| in [88, 88.72] or x in [-103.28, -88]) runs the fast path.
bool special(float x, float& out) {
  const uint32_t u = float_bits(x);
  if (((u >> 20) & 0x7ff) <= 0x42a) return false;  // |x| < 88
  if (u == 0xff800000u) return out = 0.0f, true;
  if (((u >> 20) & 0x7ff) >= 0x7f8) return out = x + x, true;
  if (x > 0x1.62e42ep6f) return out = HUGE_VALF, true;
  if (x < -0x1.9fe368p6f) return out = 0.0f, true;
  if (x < -0x1.9d1d9ep6f) {
    volatile float tiny = 0x1.4p-75f;  // computed, as glibc does (the rounding is the result)
    return out = tiny * tiny, true;
  }
  return false;
}

}  // namespace

float exp_f32(float x) {
  using namespace expf_consts;
  float special_value;
  if (special(x, special_value)) return special_value;
  const double xd = x;
  double kd = std::fma(kInvLn2N, xd, kShift);
  uint64_t ki;
  std::memcpy(&ki, &kd, sizeof ki);
  kd -= kShift;
  const double r = std::fma(kInvLn2N, xd, -kd);
  const uint64_t t = kTable[ki % 32] + (ki << 47);
  double s;
  std::memcpy(&s, &t, sizeof s);
  const double z = std::fma(kC0, r, kC1), r2 = r * r;
  double y = std::fma(kC2, r, 1.0);
  y = std::fma(z, r2, y);
  return float(y * s);
}

void exp_f32_each(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = exp_f32(x[i]);
}

}  // namespace trillion
