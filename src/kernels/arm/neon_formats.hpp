// NEON decoders of the five weight formats: 8 consecutive columns of one row
// to two 4-lane float vectors. Everything here has internal linkage (shared
// by the arm/*_neon.cpp files only).
#pragma once
#include <arm_neon.h>

#include <cstdint>

#include "kernels/format_fields.hpp"
#include "kernels/qmatrix.hpp"

namespace trillion::neon {
namespace {

struct V8 {
  float32x4_t lo, hi;
};

// Each format: its fields (kernels/format_fields.hpp: kGroup, kBits, ptr,
// at, scale_at) and load(r, c), 8 values from column c (c % 8 == 0) scaled
// as at() is.

struct F32Format : F32Fields {
  using F32Fields::F32Fields;
  V8 load(int64_t r, int64_t c) const { return {vld1q_f32(d + r * cols + c), vld1q_f32(d + r * cols + c + 4)}; }
};

struct Bf16Format : Bf16Fields {
  using Bf16Fields::Bf16Fields;
  V8 load(int64_t r, int64_t c) const {
    const uint16x8_t h = vld1q_u16(d + r * cols + c);
    return {vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16)),
            vreinterpretq_f32_u32(vshll_n_u16(vget_high_u16(h), 16))};
  }
};

// e4m3fn -> fp16 bits (format_fields.hpp), then the hardware fp16 -> f32 conversion.
struct Fp8Format : Fp8Fields {
  using Fp8Fields::Fp8Fields;
  V8 load(int64_t r, int64_t c) const {
    const int16x8_t b = vmovl_s8(vld1_s8(reinterpret_cast<const int8_t*>(d + r * cols + c)));
    const uint16x8_t h = vandq_u16(vshlq_n_u16(vreinterpretq_u16_s16(b), 7), vdupq_n_u16(0xBFFF));
    return {vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(h))), vcvt_f32_f16(vreinterpret_f16_u16(vget_high_u16(h)))};
  }
  float at(int64_t r, int64_t c) const {
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(f16_bits(r, c)))), 0);
  }
};

struct Int4Format : Int4Fields {
  using Int4Fields::Int4Fields;
  V8 load(int64_t r, int64_t c) const {
    const uint32x4_t w = vdupq_n_u32(d[(r * cols + c) >> 3]);
    const int32x4_t lo_shift = {0, -4, -8, -12}, hi_shift = {-16, -20, -24, -28};
    const uint32x4_t m = vdupq_n_u32(15);
    const int32x4_t eight = vdupq_n_s32(8);
    const int32x4_t lo = vsubq_s32(vreinterpretq_s32_u32(vandq_u32(vshlq_u32(w, lo_shift), m)), eight);
    const int32x4_t hi = vsubq_s32(vreinterpretq_s32_u32(vandq_u32(vshlq_u32(w, hi_shift), m)), eight);
    return {vcvtq_f32_s32(lo), vcvtq_f32_s32(hi)};
  }
};

struct Int8Format : Int8Fields {
  using Int8Fields::Int8Fields;
  V8 load(int64_t r, int64_t c) const {
    const int16x8_t h = vmovl_s8(vld1_s8(d + r * cols + c));
    return {vcvtq_f32_s32(vmovl_s16(vget_low_s16(h))), vcvtq_f32_s32(vmovl_s16(vget_high_s16(h)))};
  }
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
