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

#include <algorithm>
#include <cstring>

#include "kernels/arm/neon_formats.hpp"
#include "kernels/matmul_q8.hpp"
#include "kernels/named_regs.hpp"

namespace trillion::neon {
namespace {

// GCC's pre-allocation scheduling (-fschedule-insns, on at -O2 for arm64)
// hoists every SDOT of a group before the conversions and FMAs that consume
// them, which leaves more values live than the 32 registers: INT8's 4 x 2
// tile stored and reloaded 4 accumulators a group (97 instructions a group;
// 88 without that pass, no spill: bench/neon_loop_counts.py). The tiles
// are written in the order they should run, so they turn the pass off.
// Clang has no such attribute (and no such spill to avoid: untested here).
#if defined(__GNUC__) && !defined(__clang__)
#define TRILLION_TILE_ORDER __attribute__((optimize("no-schedule-insns")))
#else
#define TRILLION_TILE_ORDER
#endif

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
inline void load_group(const int8_t* p, int64_t left, int8x16_t& w0, int8x16_t& w1) {
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

constexpr int kBlock = 4;  // groups per table of scale products

// The scale products of a block of `count` <= 4 groups from g0 (the
// definition's float32 products ws * d, four groups in one vmulq): s[i * T +
// t][j] is the bf16 scale of row r0 + i, group g0 + j, times token t0 + t's
// d of that group. A group step reads its product with one ld1r (a load),
// instead of a scalar multiply and a dup per row and token.
template <int R, int T>
inline void block_scales(const QMatrix& W, const Q8Rows& xq, int64_t r0, int64_t t0, int64_t g0, int count,
                         float (*s)[kBlock]) {
  const uint16_t* sc = static_cast<const uint16_t*>(W.scale) + r0 * W.scale_cols + g0;
  float32x4_t d[T], ws[R];
  if (count == kBlock) {
    for (int t = 0; t < T; ++t) d[t] = vld1q_f32(xq.row_d(t0 + t) + g0);
    for (int i = 0; i < R; ++i) ws[i] = vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(sc + i * W.scale_cols), 16));
  } else {  // the last groups of the rows: never read past them
    for (int t = 0; t < T; ++t) {
      float b[kBlock] = {};
      std::memcpy(b, xq.row_d(t0 + t) + g0, sizeof(float) * size_t(count));
      d[t] = vld1q_f32(b);
    }
    for (int i = 0; i < R; ++i) {
      uint16_t b[kBlock] = {};
      std::memcpy(b, sc + i * W.scale_cols, sizeof(uint16_t) * size_t(count));
      ws[i] = vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(b), 16));
    }
  }
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < T; ++t) vst1q_f32(s[i * T + t], vmulq_f32(ws[i], d[t]));
}

// The tiles' 2 R T accumulators (R T <= 8): k = i T + t for an output's
// first 4 lanes (INT8: columns 0-15 of its groups; INT4: its even groups), 8 + k
// for the other 4. Named (named_regs.hpp): as arrays GCC stored every one of
// them at every group.
using Acc = NamedRegs<float32x4_t>;

// INT8_G32 group g of rows w[i] times tokens x[t] (row and token pointers
// set once per tile, the group's byte offset c = 32 g: register-offset loads,
// no address arithmetic per group), its scale products in column j of s;
// Partial: the row's partial last group, read through a buffer.
template <class Dot, int R, int T, bool Partial>
[[gnu::always_inline]] inline void int8_step(const QMatrix& W, const int8_t* const* w, const int8_t* const* x, int64_t g, const float* s,
                      Acc& acc) {
  const int64_t c = g * kQ8Group;
  int8x16_t x0[T], x1[T];
  for (int t = 0; t < T; ++t) {
    x0[t] = vld1q_s8(x[t] + c);
    x1[t] = vld1q_s8(x[t] + c + 16);
  }
  unrolled<R>([&]<int i>() __attribute__((always_inline)) {
    int8x16_t w0, w1;
    if constexpr (Partial) {
      load_group(w[i] + c, W.cols - c, w0, w1);
    } else {
      w0 = vld1q_s8(w[i] + c);
      w1 = vld1q_s8(w[i] + c + 16);
    }
    unrolled<T>([&]<int t>() __attribute__((always_inline)) {
      const float32x4_t si = vld1q_dup_f32(s + (i * T + t) * kBlock);
      float32x4_t& lo = acc.at<i * T + t>();
      float32x4_t& hi = acc.at<8 + i * T + t>();
      lo = vfmaq_f32(lo, vcvtq_f32_s32(Dot::sum4(w0, x0[t])), si);
      hi = vfmaq_f32(hi, vcvtq_f32_s32(Dot::sum4(w1, x1[t])), si);
    });
  });
}

template <int R, int T>
inline void store_outputs(Acc& acc, float* y, int64_t ldy, int64_t r0, int64_t t0) {
  unrolled<R * T>([&]<int k>() __attribute__((always_inline)) { y[(t0 + k % T) * ldy + r0 + k / T] = hsum(acc.at<k>(), acc.at<8 + k>()); });
}

template <class Dot, int R, int T>
TRILLION_TILE_ORDER void tile(const QMatrix& W, const Q8Rows& xq, int64_t r0, int64_t t0, float* y, int64_t ldy) {
  static_assert(R * T <= 8);
  Acc acc;  // zeros
  alignas(16) float s[R * T][kBlock];
  const int8_t* w[R];
  const int8_t* x[T];
  for (int i = 0; i < R; ++i) w[i] = static_cast<const int8_t*>(W.data) + (r0 + i) * W.cols;
  for (int t = 0; t < T; ++t) x[t] = xq.row_q(t0 + t);
  const int64_t full = W.cols / kQ8Group;
  for (int64_t g0 = 0; g0 < full; g0 += kBlock) {
    const int count = int(std::min<int64_t>(kBlock, full - g0));
    block_scales<R, T>(W, xq, r0, t0, g0, count, s);
    for (int j = 0; j < count; ++j) int8_step<Dot, R, T, false>(W, w, x, g0 + j, &s[0][j], acc);
  }
  if (full < xq.groups) {
    block_scales<R, T>(W, xq, r0, t0, full, 1, s);
    int8_step<Dot, R, T, true>(W, w, x, full, &s[0][0], acc);
  }
  store_outputs<R, T>(acc, y, ldy, r0, t0);
}

// INT4_G32 group g of rows w[i] times tokens x[t] (pointers set once per
// tile) into the accumulators of g % 2 == H, its scale products in column j of s.
template <class Dot, int R, int T, int H>
[[gnu::always_inline]] inline void int4_step(const uint8_t* const* w, const Q8Pair* const* x, int64_t g, const float* s, Acc& acc) {
  const int64_t p = g / 2;
  int8x16_t xe[T], xo[T];
  int32x4_t npc[T];
  for (int t = 0; t < T; ++t) {
    const Q8Pair& q = x[t][p];
    xe[t] = vld1q_s8(q.e + 16 * H);
    xo[t] = vld1q_s8(q.o + 16 * H);
    npc[t] = vnegq_s32(vld1q_s32(q.c + 4 * H));
  }
  unrolled<R>([&]<int i>() __attribute__((always_inline)) {
    const uint8x16_t b = vld1q_u8(w[i] + 16 * g);
    const int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(b, vdupq_n_u8(0x0F)));
    const int8x16_t hi = vreinterpretq_s8_u8(vshrq_n_u8(b, 4));
    unrolled<T>([&]<int t>() __attribute__((always_inline)) {
      const int32x4_t isum = Dot::sum8(npc[t], lo, xe[t], hi, xo[t]);
      float32x4_t& a = acc.at<8 * H + i * T + t>();
      a = vfmaq_f32(a, vcvtq_f32_s32(isum), vld1q_dup_f32(s + (i * T + t) * kBlock));
    });
  });
}

// INT4_G32: rows r0 + i times tokens [t0, t0 + T): whole blocks of 4 groups
// (2 pairs, no branch between their steps), then the last groups (a lone
// even group among them when the count is odd).
template <class Dot, int R, int T>
TRILLION_TILE_ORDER void int4_tile(const QMatrix& W, const Q8Rows& xq, int64_t r0, int64_t t0, float* y, int64_t ldy) {
  static_assert(R * T <= 8);
  Acc acc;  // zeros
  alignas(16) float s[R * T][kBlock];
  const uint8_t* w[R];
  const Q8Pair* x[T];
  for (int i = 0; i < R; ++i) w[i] = static_cast<const uint8_t*>(W.data) + (r0 + i) * (W.cols / 2);
  for (int t = 0; t < T; ++t) x[t] = xq.row_pairs(t0 + t);
  int64_t g0 = 0;
  for (; g0 + kBlock <= xq.groups; g0 += kBlock) {
    block_scales<R, T>(W, xq, r0, t0, g0, kBlock, s);
    int4_step<Dot, R, T, 0>(w, x, g0, &s[0][0], acc);
    int4_step<Dot, R, T, 1>(w, x, g0 + 1, &s[0][1], acc);
    int4_step<Dot, R, T, 0>(w, x, g0 + 2, &s[0][2], acc);
    int4_step<Dot, R, T, 1>(w, x, g0 + 3, &s[0][3], acc);
  }
  if (g0 < xq.groups) {
    const int count = int(xq.groups - g0);
    block_scales<R, T>(W, xq, r0, t0, g0, count, s);
    int j = 0;
    for (; j + 2 <= count; j += 2) {
      int4_step<Dot, R, T, 0>(w, x, g0 + j, &s[0][j], acc);
      int4_step<Dot, R, T, 1>(w, x, g0 + j + 1, &s[0][j + 1], acc);
    }
    if (j < count) int4_step<Dot, R, T, 0>(w, x, g0 + j, &s[0][j], acc);
  }
  store_outputs<R, T>(acc, y, ldy, r0, t0);
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
