// The scalar side of the five weight formats as the ISA decoders read them
// (x86/avx2_formats.hpp, arm/neon_formats.hpp): each format's pointers and
// sizes from a QMatrix, kGroup (columns per scale, 0 = unscaled), kBits
// (stored bits per weight), ptr(r, c) (the address of W[r][c]'s byte, for
// prefetching), at(r, c) (one stored value) and scale_at(r, c) (the factor
// that turns at/load values into weights). An ISA's decoder derives from
// these and adds its vector load; FP8's at() stays with the ISA (it uses
// the ISA's fp16 conversion, as its load does).
//
// Internal linkage, as matmul_t_tiling.hpp: each ISA-flagged file gets its
// own copy, so no AVX2-compiled body can stand in for another file's at link
// time. kernels/decode_scalar.hpp, the portable definition, has external
// linkage and is kept apart for that reason (docs/code.md).
#pragma once
#include <cstdint>
#include <cstring>

#include "kernels/qmatrix.hpp"

namespace trillion {
namespace {

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

inline float bf16_value(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct F32Fields {
  static constexpr int64_t kGroup = 0;
  static constexpr int kBits = 32;
  const float* d;
  int64_t cols;
  explicit F32Fields(const QMatrix& W) : d(static_cast<const float*>(W.data)), cols(W.cols) {}
  const void* ptr(int64_t r, int64_t c) const { return d + r * cols + c; }
  float at(int64_t r, int64_t c) const { return d[r * cols + c]; }
  float scale_at(int64_t, int64_t) const { return 1.0f; }
};

// bf16 -> f32: the 16 bits moved to the top half.
struct Bf16Fields {
  static constexpr int64_t kGroup = 0;
  static constexpr int kBits = 16;
  const uint16_t* d;
  int64_t cols;
  explicit Bf16Fields(const QMatrix& W) : d(static_cast<const uint16_t*>(W.data)), cols(W.cols) {}
  const void* ptr(int64_t r, int64_t c) const { return d + r * cols + c; }
  float at(int64_t r, int64_t c) const { return bf16_value(d[r * cols + c]); }
  float scale_at(int64_t, int64_t) const { return 1.0f; }
};

// e4m3fn decoded through fp16 (the ISA's part): its 7 exponent/mantissa bits
// moved under fp16's (bias 15 instead of 7, so the value is 2^-8 of the
// e4m3 value, subnormals included); scale_at carries the 2^8 back (exact: a
// power of two). The NaN codes 0x7f/0xff decode as +-480 (checkpoints hold
// no NaN).
struct Fp8Fields {
  static constexpr int64_t kGroup = 128;
  static constexpr int kBits = 8;
  const uint8_t* d;
  const float* s;
  int64_t cols, scale_cols, row0;
  explicit Fp8Fields(const QMatrix& W)
      : d(static_cast<const uint8_t*>(W.data)), s(static_cast<const float*>(W.scale)), cols(W.cols),
        scale_cols(W.scale_cols), row0(W.scale_row0) {}
  const void* ptr(int64_t r, int64_t c) const { return d + r * cols + c; }
  // W[r][c]'s byte moved to fp16 bits: the input of the ISA's conversion.
  uint16_t f16_bits(int64_t r, int64_t c) const {
    const int16_t v = int16_t(int8_t(d[r * cols + c]));
    return uint16_t((uint16_t(v) << 7) & 0xBFFF);
  }
  float scale_at(int64_t r, int64_t c) const { return s[((row0 + r) >> 7) * scale_cols + (c >> 7)] * 256.0f; }
};

// int4: one 32-bit word holds columns 8j..8j+7 (column 8j+i in bits 4i..4i+3, as q+8).
struct Int4Fields {
  static constexpr int64_t kGroup = 32;
  static constexpr int kBits = 4;
  const uint32_t* d;
  const uint16_t* s;
  int64_t cols, scale_cols;
  explicit Int4Fields(const QMatrix& W)
      : d(static_cast<const uint32_t*>(W.data)), s(static_cast<const uint16_t*>(W.scale)), cols(W.cols),
        scale_cols(W.scale_cols) {}
  const void* ptr(int64_t r, int64_t c) const { return d + ((r * cols + c) >> 3); }
  float at(int64_t r, int64_t c) const { return float(int((d[(r * cols + c) >> 3] >> (4 * (c & 7))) & 15u) - 8); }
  float scale_at(int64_t r, int64_t c) const { return bf16_value(s[r * scale_cols + (c >> 5)]); }
};

// int8: q as stored, one bf16 scale per 32 columns of a row.
struct Int8Fields {
  static constexpr int64_t kGroup = 32;
  static constexpr int kBits = 8;
  const int8_t* d;
  const uint16_t* s;
  int64_t cols, scale_cols;
  explicit Int8Fields(const QMatrix& W)
      : d(static_cast<const int8_t*>(W.data)), s(static_cast<const uint16_t*>(W.scale)), cols(W.cols),
        scale_cols(W.scale_cols) {}
  const void* ptr(int64_t r, int64_t c) const { return d + r * cols + c; }
  float at(int64_t r, int64_t c) const { return float(d[r * cols + c]); }
  float scale_at(int64_t r, int64_t c) const { return bf16_value(s[r * scale_cols + (c >> 5)]); }
};

}  // namespace
}  // namespace trillion
