// NEON integer-dot kernels on every arm64 CPU: quantization of activation
// rows, and the product with widening multiplies and pairwise adds, or SDOT
// (matmul_q8_sdot.cpp) when the CPU has dotprod. Same bits either way. The
// neon-i8mm path's SMMLA product (matmul_q8_smmla.cpp) runs when this file's
// check finds both dotprod and i8mm.
#include <cfloat>
#include <cmath>

#include "kernels/arm/q8_neon_tile.hpp"
#include "kernels/q8_scalar.hpp"
#include "platform/cpu.hpp"

namespace trillion::neon {

void matmul_q8_rows_sdot(const QMatrix& W, const Q8Rows& xq, float* y, int64_t ldy, int64_t r0, int64_t r1);

namespace {

struct WideningSum {
  // Products of columns 0-7 and 8-15 as int16, pairs to int32, pairs again:
  // lane k = columns 4k..4k+3.
  static int32x4_t sum4(int8x16_t a, int8x16_t b) {
    const int32x4_t s0 = vpaddlq_s16(vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    const int32x4_t s1 = vpaddlq_s16(vmull_high_s8(a, b));
    return vpaddq_s32(s0, s1);
  }
  // init + lanes of a0.b0 + lanes of a1.b1 (exact).
  static int32x4_t sum8(int32x4_t init, int8x16_t a0, int8x16_t b0, int8x16_t a1, int8x16_t b1) {
    return vaddq_s32(init, vaddq_s32(sum4(a0, b0), sum4(a1, b1)));
  }
};

// The CPU's features as the operating system reports them (platform/cpu.hpp).
bool cpu_has_dotprod() { return platform::arm_has_dotprod(); }
bool cpu_has_i8mm() { return platform::arm_has_i8mm(); }

}  // namespace

void quantize_q8_row(const float* x, int64_t cols, int8_t* q, float* d) {
  const int64_t full = cols / kQ8Group;
  for (int64_t g = 0; g < full; ++g) {
    const float* xg = x + g * kQ8Group;
    float32x4_t v[8];
    float32x4_t amax = vdupq_n_f32(0.0f);
    uint32x4_t finite = vdupq_n_u32(~0u);
    for (int k = 0; k < 8; ++k) {
      v[k] = vld1q_f32(xg + 4 * k);
      const float32x4_t a = vabsq_f32(v[k]);
      finite = vandq_u32(finite, vcleq_f32(a, vdupq_n_f32(FLT_MAX)));  // false for NaN and inf
      amax = vmaxq_f32(amax, a);
    }
    const bool ok = vminvq_u32(finite) != 0;
    const float dg = ok ? vmaxvq_f32(amax) / 127.0f : NAN;
    d[g] = dg;
    int8_t* qg = q + g * kQ8Group;
    if (!(ok && dg > 0.0f)) {
      vst1q_s8(qg, vdupq_n_s8(0));
      vst1q_s8(qg + 16, vdupq_n_s8(0));
      continue;
    }
    const float32x4_t dv = vdupq_n_f32(dg);
    int16x8_t h[4];
    for (int k = 0; k < 4; ++k)  // x / d exactly rounded, then to nearest, ties to even
      h[k] = vcombine_s16(vqmovn_s32(vcvtnq_s32_f32(vdivq_f32(v[2 * k], dv))),
                          vqmovn_s32(vcvtnq_s32_f32(vdivq_f32(v[2 * k + 1], dv))));
    vst1q_s8(qg, vcombine_s8(vqmovn_s16(h[0]), vqmovn_s16(h[1])));
    vst1q_s8(qg + 16, vcombine_s8(vqmovn_s16(h[2]), vqmovn_s16(h[3])));
  }
  if (full * kQ8Group < cols)  // the partial last group: the same operations, one column at a time
    d[full] = quantize_q8_group_scalar(x, full * kQ8Group, cols, q + full * kQ8Group);
}

void matmul_q8_rows(const QMatrix& W, const Q8Rows& xq, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  static const bool sdot = cpu_has_dotprod();
  if (sdot) matmul_q8_rows_sdot(W, xq, y, ldy, r0, r1);
  else matmul_q8_rows_with<WideningSum>(W, xq, y, ldy, r0, r1);
}

}  // namespace trillion::neon

namespace trillion {
// Every CPU with i8mm has dotprod too (ARMv8.6 requires both); asking for
// both keeps the SDOT tiles the SMMLA file falls back on safe regardless.
bool cpu_has_neon_i8mm() { return neon::cpu_has_dotprod() && neon::cpu_has_i8mm(); }
}  // namespace trillion
