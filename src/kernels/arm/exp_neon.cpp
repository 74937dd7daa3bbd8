// exp_f32 (expf.hpp) with NEON: two lanes of double per register, 4 floats a
// step, the table read lane by lane (2 lanes: a TBL over its 256 bytes would
// cost more). The same operations in the same order as the scalar
// definition, each fma one rounding, so the same bits; a step with a lane out
// of the fast path's range, and the last n % 4, run exp_f32 on each.
// Why not the scalar exp_f32 alone (as before): its loop in exp_f32_each is
// 24 instructions a float with the range check; this one is 65 for 4 floats
// (16.3 a float), counted in the cross build's disassembly (GCC 12 -O3). Not
// timed on arm64 hardware; kernel_selftest checks the bits under qemu.
#include <arm_neon.h>

#include "kernels/expf.hpp"

namespace trillion::neon {
namespace {

float64x2_t exp_lanes(float64x2_t xd) {
  using namespace expf_consts;
  const float64x2_t inv = vdupq_n_f64(kInvLn2N), shift = vdupq_n_f64(kShift);
  float64x2_t kd = vfmaq_f64(shift, inv, xd);  // fma(32/ln2, x, shift)
  const uint64x2_t ki = vreinterpretq_u64_f64(kd);
  kd = vsubq_f64(kd, shift);
  const float64x2_t r = vfmaq_f64(vnegq_f64(kd), inv, xd);  // fma(32/ln2, x, -kd)
  const uint64x2_t tab = vcombine_u64(vcreate_u64(kTable[vgetq_lane_u64(ki, 0) % 32]),
                                      vcreate_u64(kTable[vgetq_lane_u64(ki, 1) % 32]));
  const float64x2_t s = vreinterpretq_f64_u64(vaddq_u64(tab, vshlq_n_u64(ki, 47)));
  const float64x2_t z = vfmaq_f64(vdupq_n_f64(kC1), vdupq_n_f64(kC0), r);  // fma(C0, r, C1)
  const float64x2_t r2 = vmulq_f64(r, r);
  float64x2_t y = vfmaq_f64(vdupq_n_f64(1.0), vdupq_n_f64(kC2), r);  // fma(C2, r, 1)
  y = vfmaq_f64(y, z, r2);                                           // fma(z, r2, y)
  return vmulq_f64(y, s);
}

}  // namespace

void exp_each(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const float32x4_t v = vld1q_f32(x + i);
    const uint32x4_t abs = vandq_u32(vreinterpretq_u32_f32(v), vdupq_n_u32(0x7fffffff));
    if (vmaxvq_u32(abs) > expf_consts::kLastFastAbsBits) {
      for (int64_t j = i; j < i + 4; ++j) y[j] = exp_f32(x[j]);
      continue;
    }
    const float64x2_t lo = exp_lanes(vcvt_f64_f32(vget_low_f32(v))), hi = exp_lanes(vcvt_high_f64_f32(v));
    vst1q_f32(y + i, vcvt_high_f32_f64(vcvt_f32_f64(lo), hi));  // each rounded once, to nearest
  }
  for (; i < n; ++i) y[i] = exp_f32(x[i]);
}

}  // namespace trillion::neon
