// The NEON integer-dot tile (matmul_q8.hpp defines the arithmetic to the
// bit), over a lane-sum operation `Dot`: acc lane k += the exact sum of
// columns 4k..4k+3 of a 16-column half group. matmul_q8_neon.cpp gives it
// widening multiplies (every arm64 CPU), matmul_q8_sdot.cpp SDOT (ARMv8.2
// dotprod, built with that flag); both sums are exact, so both give the same
// bits. INT8: lanes 0-3 of the definition are the first half group's, 4-7
// the second's. INT4: a group's 16 bytes masked and shifted are its even and
// odd columns (as stored, w + 8); Dot::sum8 adds their products with the pair
// layout's even and odd activations to -pc, so each of a group's 4 lanes is
// its 8 columns' exact isum (lanes 0-3 of the definition for even groups,
// 4-7 for odd). Internal linkage: each file gets its own copy.
#pragma once
#include <arm_neon.h>

#include <cstring>

#include "kernels/arm/neon_formats.hpp"
#include "kernels/matmul_q8.hpp"

namespace trillion::neon {
namespace {

#if defined(__ARM_FEATURE_DOTPROD)
// The lane sums on SDOT, for the files built with +dotprod (matmul_q8_sdot.cpp,
// matmul_q8_smmla.cpp).
struct SdotSum {
  static int32x4_t sum4(int8x16_t a, int8x16_t b) { return vdotq_s32(vdupq_n_s32(0), a, b); }
  static int32x4_t sum8(int32x4_t init, int8x16_t a0, int8x16_t b0, int8x16_t a1, int8x16_t b1) {
    return vdotq_s32(vdotq_s32(init, a0, b0), a1, b1);
  }
};
#endif

// ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)) with a0-3 in lo, a4-7 in hi.
inline float hsum(float32x4_t lo, float32x4_t hi) {
  const float32x4_t b = vaddq_f32(lo, hi);
  const float32x2_t c = vadd_f32(vget_low_f32(b), vget_high_f32(b));
  return vget_lane_f32(c, 0) + vget_lane_f32(c, 1);
}

// INT8_G32 group g of row r as two halves of 16 int8 weights (any group,
// the partial last one included). The tile calls it for the partial group
// only; a helper without the whole-group branch made GCC 12 spill more in
// the tile's group loop (142 instructions a group against 132).
inline void load_group(const QMatrix& W, int64_t r, int64_t g, int8x16_t& w0, int8x16_t& w1) {
  const int8_t* p = static_cast<const int8_t*>(W.data) + r * W.cols + g * kQ8Group;
  const int64_t left = W.cols - g * kQ8Group;
  if (left >= kQ8Group) {
    w0 = vld1q_s8(p);
    w1 = vld1q_s8(p + 16);
    return;
  }
  int8_t buf[kQ8Group] = {};  // the row's partial last group; never read past its end
  std::memcpy(buf, p, size_t(left));
  w0 = vld1q_s8(buf);
  w1 = vld1q_s8(buf + 16);
}

template <class Dot, int R, int T>
void tile(const QMatrix& W, const Q8Rows& xq, int64_t r0, int64_t t0, float* y, int64_t ldy) {
  const uint16_t* wscale = static_cast<const uint16_t*>(W.scale);
  float32x4_t lo[R][T], hi[R][T];
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < T; ++t) lo[i][t] = hi[i][t] = vdupq_n_f32(0.0f);
  // Group g; Partial: the row's partial last group, read through a buffer.
  // Apart from the loop so its memcpy does not make the compiler keep the
  // accumulators on the stack (a load and a store per FMA, as it did).
  auto step = [&]<bool Partial>(int64_t g) {
    int8x16_t x0[T], x1[T];
    float d[T];
    for (int t = 0; t < T; ++t) {
      const int8_t* q = xq.row_q(t0 + t) + g * kQ8Group;
      x0[t] = vld1q_s8(q);
      x1[t] = vld1q_s8(q + 16);
      d[t] = xq.row_d(t0 + t)[g];
    }
    for (int i = 0; i < R; ++i) {
      int8x16_t w0, w1;
      if constexpr (Partial) {
        load_group(W, r0 + i, g, w0, w1);
      } else {
        const int8_t* p = static_cast<const int8_t*>(W.data) + (r0 + i) * W.cols + g * kQ8Group;
        w0 = vld1q_s8(p);
        w1 = vld1q_s8(p + 16);
      }
      const float ws = bf16_value(wscale[(r0 + i) * W.scale_cols + g]);
      for (int t = 0; t < T; ++t) {
        const float32x4_t s = vdupq_n_f32(ws * d[t]);
        lo[i][t] = vfmaq_f32(lo[i][t], vcvtq_f32_s32(Dot::sum4(w0, x0[t])), s);
        hi[i][t] = vfmaq_f32(hi[i][t], vcvtq_f32_s32(Dot::sum4(w1, x1[t])), s);
      }
    }
  };
  const int64_t full = W.cols / kQ8Group;
  for (int64_t g = 0; g < full; ++g) step.template operator()<false>(g);
  if (full < xq.groups) step.template operator()<true>(full);
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < T; ++t) y[(t0 + t) * ldy + r0 + i] = hsum(lo[i][t], hi[i][t]);
}

// INT4_G32: group g of rows r0 + i times tokens [t0, t0 + T).
template <class Dot, int R, int T>
void int4_tile(const QMatrix& W, const Q8Rows& xq, int64_t r0, int64_t t0, float* y, int64_t ldy) {
  const uint8_t* wd = static_cast<const uint8_t*>(W.data);
  const uint16_t* wscale = static_cast<const uint16_t*>(W.scale);
  float32x4_t acc[2][R][T];  // [g % 2]: lanes 0-3, 4-7
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < R; ++i)
      for (int t = 0; t < T; ++t) acc[h][i][t] = vdupq_n_f32(0.0f);
  // Group g into the accumulators of g % 2 == H (a constant, so they stay in registers).
  auto step = [&]<int H>(int64_t g) {
    const int64_t p = g / 2;
    int8x16_t xe[T], xo[T];
    int32x4_t npc[T];
    float d[T];
    for (int t = 0; t < T; ++t) {
      const Q8Pair& x = xq.row_pairs(t0 + t)[p];
      xe[t] = vld1q_s8(x.e + 16 * H);
      xo[t] = vld1q_s8(x.o + 16 * H);
      npc[t] = vnegq_s32(vld1q_s32(x.c + 4 * H));
      d[t] = xq.row_d(t0 + t)[g];
    }
    for (int i = 0; i < R; ++i) {
      const uint8x16_t b = vld1q_u8(wd + (r0 + i) * (W.cols / 2) + 16 * g);
      const int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(b, vdupq_n_u8(0x0F)));
      const int8x16_t hi = vreinterpretq_s8_u8(vshrq_n_u8(b, 4));
      const float ws = bf16_value(wscale[(r0 + i) * W.scale_cols + g]);
      for (int t = 0; t < T; ++t) {
        const int32x4_t isum = Dot::sum8(npc[t], lo, xe[t], hi, xo[t]);
        acc[H][i][t] = vfmaq_f32(acc[H][i][t], vcvtq_f32_s32(isum), vdupq_n_f32(ws * d[t]));
      }
    }
  };
  int64_t g = 0;
  for (; g + 2 <= xq.groups; g += 2) {
    step.template operator()<0>(g);
    step.template operator()<1>(g + 1);
  }
  if (g < xq.groups) step.template operator()<0>(g);
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < T; ++t) y[(t0 + t) * ldy + r0 + i] = hsum(acc[0][i][t], acc[1][i][t]);
}

template <class Dot, MatFormat F>
void rows_q8(const QMatrix& W, const Q8Rows& xq, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  auto all_tokens = [&]<int R>(int64_t r) {
    int64_t t = 0;
    if constexpr (F == MatFormat::INT8_G32) {
      for (; t + 2 <= xq.n; t += 2) tile<Dot, R, 2>(W, xq, r, t, y, ldy);
      if (t < xq.n) tile<Dot, R, 1>(W, xq, r, t, y, ldy);
    } else {
      for (; t + 2 <= xq.n; t += 2) int4_tile<Dot, R, 2>(W, xq, r, t, y, ldy);
      if (t < xq.n) int4_tile<Dot, R, 1>(W, xq, r, t, y, ldy);
    }
  };
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4) all_tokens.template operator()<4>(r);
  for (; r < r1; ++r) all_tokens.template operator()<1>(r);
}

template <class Dot>
void matmul_q8_rows_with(const QMatrix& W, const Q8Rows& xq, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  if (W.format == MatFormat::INT8_G32) rows_q8<Dot, MatFormat::INT8_G32>(W, xq, y, ldy, r0, r1);
  else rows_q8<Dot, MatFormat::INT4_G32>(W, xq, y, ldy, r0, r1);
}

}  // namespace
}  // namespace trillion::neon
