// arm64 NEON matmul: y[t][r] = sum_c W[r][c] x[t][c], register tiles of up to
// 4 rows x 2 tokens sharing each decoded weight vector. The transposed product,
// dot and axpy of this path are the portable ones (kernel_table.hpp).
//
// Per output element, whatever tile it falls in: two 4-lane FMA accumulators
// (columns c..c+3 and c+4..c+7 of each 8-column chunk) per scale group (128
// FP8, 32 INT4, the whole row otherwise) over the group's chunks in order;
// each fused into its 4-lane total times the group scale; the totals added
// (lo + hi), then lanes (0+2)+(1+3); then the columns past the last multiple
// of 8 (summed in order, times their scale) added last.
#include <arm_neon.h>

#include <cstring>

#include "kernels/kernel_table.hpp"

namespace trillion {
namespace neon {
namespace {

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

inline float bf16_value(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct V8 {
  float32x4_t lo, hi;
};

struct F32Format {
  static constexpr int64_t kGroup = 0;
  const float* d;
  int64_t cols;
  explicit F32Format(const QMatrix& W) : d(static_cast<const float*>(W.data)), cols(W.cols) {}
  V8 load(int64_t r, int64_t c) const { return {vld1q_f32(d + r * cols + c), vld1q_f32(d + r * cols + c + 4)}; }
  float at(int64_t r, int64_t c) const { return d[r * cols + c]; }
  float scale_at(int64_t, int64_t) const { return 1.0f; }
};

// bf16 -> f32: the 16 bits moved to the top half.
struct Bf16Format {
  static constexpr int64_t kGroup = 0;
  const uint16_t* d;
  int64_t cols;
  explicit Bf16Format(const QMatrix& W) : d(static_cast<const uint16_t*>(W.data)), cols(W.cols) {}
  V8 load(int64_t r, int64_t c) const {
    const uint16x8_t h = vld1q_u16(d + r * cols + c);
    return {vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16)),
            vreinterpretq_f32_u32(vshll_n_u16(vget_high_u16(h), 16))};
  }
  float at(int64_t r, int64_t c) const { return bf16_value(d[r * cols + c]); }
  float scale_at(int64_t, int64_t) const { return 1.0f; }
};

// e4m3fn -> fp16 bits (exponent/mantissa under fp16's, 2^-8 of the value,
// subnormals included), then the hardware fp16 -> f32 conversion; scale_at
// carries the 2^8 back. The NaN codes 0x7f/0xff decode as +-480.
struct Fp8Format {
  static constexpr int64_t kGroup = 128;
  const uint8_t* d;
  const float* s;
  int64_t cols, scale_cols, row0;
  explicit Fp8Format(const QMatrix& W)
      : d(static_cast<const uint8_t*>(W.data)), s(static_cast<const float*>(W.scale)), cols(W.cols),
        scale_cols(W.scale_cols), row0(W.scale_row0) {}
  V8 load(int64_t r, int64_t c) const {
    const int16x8_t b = vmovl_s8(vld1_s8(reinterpret_cast<const int8_t*>(d + r * cols + c)));
    const uint16x8_t h = vandq_u16(vshlq_n_u16(vreinterpretq_u16_s16(b), 7), vdupq_n_u16(0xBFFF));
    return {vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(h))), vcvt_f32_f16(vreinterpret_f16_u16(vget_high_u16(h)))};
  }
  float at(int64_t r, int64_t c) const {
    const int16_t v = int16_t(int8_t(d[r * cols + c]));
    const uint16_t h = uint16_t((uint16_t(v) << 7) & 0xBFFF);
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
  }
  float scale_at(int64_t r, int64_t c) const { return s[((row0 + r) >> 7) * scale_cols + (c >> 7)] * 256.0f; }
};

// int4: one 32-bit word holds columns 8j..8j+7 (column 8j+i in bits 4i..4i+3, as q+8).
struct Int4Format {
  static constexpr int64_t kGroup = 32;
  const uint32_t* d;
  const uint16_t* s;
  int64_t cols, scale_cols;
  explicit Int4Format(const QMatrix& W)
      : d(static_cast<const uint32_t*>(W.data)), s(static_cast<const uint16_t*>(W.scale)), cols(W.cols),
        scale_cols(W.scale_cols) {}
  V8 load(int64_t r, int64_t c) const {
    const uint32x4_t w = vdupq_n_u32(d[(r * cols + c) >> 3]);
    const int32x4_t lo_shift = {0, -4, -8, -12}, hi_shift = {-16, -20, -24, -28};
    const uint32x4_t m = vdupq_n_u32(15);
    const int32x4_t eight = vdupq_n_s32(8);
    const int32x4_t lo = vsubq_s32(vreinterpretq_s32_u32(vandq_u32(vshlq_u32(w, lo_shift), m)), eight);
    const int32x4_t hi = vsubq_s32(vreinterpretq_s32_u32(vandq_u32(vshlq_u32(w, hi_shift), m)), eight);
    return {vcvtq_f32_s32(lo), vcvtq_f32_s32(hi)};
  }
  float at(int64_t r, int64_t c) const { return float(int((d[(r * cols + c) >> 3] >> (4 * (c & 7))) & 15u) - 8); }
  float scale_at(int64_t r, int64_t c) const { return bf16_value(s[r * scale_cols + (c >> 5)]); }
};

// int8: q as stored, one bf16 scale per 32 columns of a row.
struct Int8Format {
  static constexpr int64_t kGroup = 32;
  const int8_t* d;
  const uint16_t* s;
  int64_t cols, scale_cols;
  explicit Int8Format(const QMatrix& W)
      : d(static_cast<const int8_t*>(W.data)), s(static_cast<const uint16_t*>(W.scale)), cols(W.cols),
        scale_cols(W.scale_cols) {}
  V8 load(int64_t r, int64_t c) const {
    const int16x8_t h = vmovl_s8(vld1_s8(d + r * cols + c));
    return {vcvtq_f32_s32(vmovl_s16(vget_low_s16(h))), vcvtq_f32_s32(vmovl_s16(vget_high_s16(h)))};
  }
  float at(int64_t r, int64_t c) const { return float(d[r * cols + c]); }
  float scale_at(int64_t r, int64_t c) const { return bf16_value(s[r * scale_cols + (c >> 5)]); }
};

template <class Fn>
void with_decoder(const QMatrix& W, Fn&& fn) {
  switch (W.format) {
    case MatFormat::F32: fn(F32Format(W)); return;
    case MatFormat::BF16: fn(Bf16Format(W)); return;
    case MatFormat::FP8_B128: fn(Fp8Format(W)); return;
    case MatFormat::INT4_G32: fn(Int4Format(W)); return;
    case MatFormat::INT8_G32: fn(Int8Format(W)); return;
  }
}

constexpr int kMaxRows = 4, kMaxToks = 2;

template <class F, int RT, int TT>
inline void accumulate(const F& f, int64_t cols, const float* x, int64_t r, int64_t t0, int64_t c0, int64_t c1,
                       V8 (&blk)[RT][TT]) {
  for (int64_t c = c0; c < c1; c += 8) {
    V8 w[RT];
    for (int i = 0; i < RT; ++i) w[i] = f.load(r + i, c);
    for (int t = 0; t < TT; ++t) {
      const float* xt = x + (t0 + t) * cols + c;
      const float32x4_t xl = vld1q_f32(xt), xh = vld1q_f32(xt + 4);
      for (int i = 0; i < RT; ++i) {
        blk[i][t].lo = vfmaq_f32(blk[i][t].lo, w[i].lo, xl);
        blk[i][t].hi = vfmaq_f32(blk[i][t].hi, w[i].hi, xh);
      }
    }
  }
}

template <class F>
__attribute__((noinline)) float tail_sum(const F& f, int64_t r, const float* xt, int64_t group0, int64_t cv,
                                         int64_t cols) {
  float s = 0.0f;
  for (int64_t c = cv; c < cols; ++c) s += f.at(r, c) * xt[c];
  return s * f.scale_at(r, group0);
}

template <class F, int RT, int TT>
void rows_tile(const F& f, int64_t cols, const float* x, float* y, int64_t ldy, int64_t r, int64_t t0) {
  V8 tot[RT][TT];
  for (int i = 0; i < RT; ++i)
    for (int t = 0; t < TT; ++t) tot[i][t] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
  const int64_t cv = cols & ~int64_t(7);
  if constexpr (F::kGroup == 0) {
    accumulate<F, RT, TT>(f, cols, x, r, t0, 0, cv, tot);
  } else {
    for (int64_t g = 0; g < cv; g += F::kGroup) {
      V8 blk[RT][TT];
      for (int i = 0; i < RT; ++i)
        for (int t = 0; t < TT; ++t) blk[i][t] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
      accumulate<F, RT, TT>(f, cols, x, r, t0, g, min64(g + F::kGroup, cv), blk);
      for (int i = 0; i < RT; ++i) {
        const float32x4_t s = vdupq_n_f32(f.scale_at(r + i, g));
        for (int t = 0; t < TT; ++t) {
          tot[i][t].lo = vfmaq_f32(tot[i][t].lo, blk[i][t].lo, s);
          tot[i][t].hi = vfmaq_f32(tot[i][t].hi, blk[i][t].hi, s);
        }
      }
    }
  }
  for (int i = 0; i < RT; ++i)
    for (int t = 0; t < TT; ++t) {
      const float32x4_t v = vaddq_f32(tot[i][t].lo, tot[i][t].hi);
      const float32x2_t p = vadd_f32(vget_low_f32(v), vget_high_f32(v));  // (0+2), (1+3)
      float sum = vget_lane_f32(p, 0) + vget_lane_f32(p, 1);
      if (cv < cols) {
        int64_t group0 = 0;
        if constexpr (F::kGroup != 0) group0 = (cv / F::kGroup) * F::kGroup;
        sum += tail_sum(f, r + i, x + (t0 + t) * cols, group0, cv, cols);
      }
      y[(t0 + t) * ldy + r + i] = sum;
    }
}

template <class F, int RT>
void rows_fixed(const F& f, int64_t cols, const float* x, int64_t n, float* y, int64_t ldy, int64_t r) {
  int64_t t = 0;
  for (; t + kMaxToks <= n; t += kMaxToks) rows_tile<F, RT, kMaxToks>(f, cols, x, y, ldy, r, t);
  if (t < n) rows_tile<F, RT, 1>(f, cols, x, y, ldy, r, t);
}

template <class F>
void rows(const F& f, int64_t cols, const float* x, int64_t n, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  int64_t r = r0;
  for (; r + kMaxRows <= r1; r += kMaxRows) rows_fixed<F, kMaxRows>(f, cols, x, n, y, ldy, r);
  switch (r1 - r) {
    case 3: rows_fixed<F, 3>(f, cols, x, n, y, ldy, r); break;
    case 2: rows_fixed<F, 2>(f, cols, x, n, y, ldy, r); break;
    case 1: rows_fixed<F, 1>(f, cols, x, n, y, ldy, r); break;
    default: break;
  }
}

}  // namespace

void matmul_rows(const QMatrix& W, const float* x, int64_t n, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  with_decoder(W, [&](const auto& f) { rows(f, W.cols, x, n, y, ldy, r0, r1); });
}

}  // namespace neon

const KernelTable* neon_kernel_table() {
  static const KernelTable table = {neon::matmul_rows, portable_kernel_table().matmul_t_cols,
                                    portable_kernel_table().dot, portable_kernel_table().axpy};
  return &table;
}

bool cpu_has_neon() { return true; }  // every arm64 CPU (Advanced SIMD is mandatory in ARMv8-A)

}  // namespace trillion
