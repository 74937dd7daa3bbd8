// Scalar element access to a QMatrix in its stored format: the definitions
// the reference and portable kernels use (docs/checkpoint.md gives the math).
// Internal to src/kernels; not included by the ISA-flagged files.
#pragma once
#include <cstdint>

#include "common/numeric.hpp"
#include "kernels/qmatrix.hpp"

namespace trillion::detail {

// The stored value of W[r][c] before its scale: the float, the bf16, the
// e4m3 value, the int4 q in [-8, 7] or the int8 q.
template <MatFormat F>
inline float stored_value(const QMatrix& W, int64_t r, int64_t c) {
  if constexpr (F == MatFormat::F32) {
    return static_cast<const float*>(W.data)[r * W.cols + c];
  } else if constexpr (F == MatFormat::BF16) {
    return bf16_to_f32(static_cast<const uint16_t*>(W.data)[r * W.cols + c]);
  } else if constexpr (F == MatFormat::FP8_B128) {
    return fp8e4m3_to_f32(static_cast<const uint8_t*>(W.data)[r * W.cols + c]);
  } else if constexpr (F == MatFormat::INT8_G32) {
    return float(static_cast<const int8_t*>(W.data)[r * W.cols + c]);
  } else {
    const uint32_t word = static_cast<const uint32_t*>(W.data)[(r * W.cols + c) / 8];
    return float(int((word >> (4 * (c % 8))) & 15u) - 8);
  }
}

// The scale of the group holding W[r][c]: 1 for F32/BF16.
template <MatFormat F>
inline float group_scale(const QMatrix& W, int64_t r, int64_t c) {
  if constexpr (F == MatFormat::FP8_B128) {
    return static_cast<const float*>(W.scale)[((W.scale_row0 + r) / 128) * W.scale_cols + c / 128];
  } else if constexpr (F == MatFormat::INT4_G32 || F == MatFormat::INT8_G32) {
    return bf16_to_f32(static_cast<const uint16_t*>(W.scale)[r * W.scale_cols + c / 32]);
  } else {
    return 1.0f;
  }
}

// Calls fn.template operator()<F>() with W's format as a compile-time value.
template <class Fn>
inline decltype(auto) with_format(MatFormat f, Fn&& fn) {
  switch (f) {
    case MatFormat::F32: return fn.template operator()<MatFormat::F32>();
    case MatFormat::BF16: return fn.template operator()<MatFormat::BF16>();
    case MatFormat::FP8_B128: return fn.template operator()<MatFormat::FP8_B128>();
    case MatFormat::INT8_G32: return fn.template operator()<MatFormat::INT8_G32>();
    case MatFormat::INT4_G32: break;
  }
  return fn.template operator()<MatFormat::INT4_G32>();
}

// W[r][c] dequantized to float: stored value times scale, rounded once.
inline float dequantized(const QMatrix& W, int64_t r, int64_t c) {
  return with_format(W.format, [&]<MatFormat F>() { return stored_value<F>(W, r, c) * group_scale<F>(W, r, c); });
}

// Columns sharing one scale along a row: 128 (FP8), 32 (INT4, INT8), 0 = unscaled.
constexpr int64_t group_width(MatFormat f) {
  return f == MatFormat::FP8_B128 ? 128 : (f == MatFormat::INT4_G32 || f == MatFormat::INT8_G32) ? 32 : 0;
}

}  // namespace trillion::detail
