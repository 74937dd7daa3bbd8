// NEON decoders of the five weight formats: 8 consecutive columns of one row
// to two 4-lane float vectors. Everything here has internal linkage (shared
// by the arm/*_neon.cpp files only).
#pragma once
#include <arm_neon.h>

#include <cstdint>
#include <cstring>

#include "kernels/qmatrix.hpp"

namespace trillion::neon {
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

}  // namespace
}  // namespace trillion::neon
