// AVX2 decoders of the five weight formats: 8 consecutive columns of one row
// to 8 floats in a register. Included only by files built with
// -mavx2 -mfma -mf16c; everything here has internal linkage, so no
// AVX2-compiled inline function can leak into portable code through the linker.
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/qmatrix.hpp"

namespace trillion::avx2 {
namespace {

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

inline float bf16_value(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Sum of the 8 lanes in a fixed tree: (lo + hi) halves, then pairs.
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Each format: kGroup (columns per scale, 0 = unscaled), kBits (stored bits
// per weight), ptr(r, c) (address of W[r][c]'s byte, for prefetching),
// load(r, c) (8 values from column c, c % 8 == 0), at(r, c) (one value, same
// scaling as load), scale_at(r, c) (the factor that turns load/at values into weights).

struct F32Format {
  static constexpr int64_t kGroup = 0;
  static constexpr int kBits = 32;
  const float* d;
  int64_t cols;
  explicit F32Format(const QMatrix& W) : d(static_cast<const float*>(W.data)), cols(W.cols) {}
  const void* ptr(int64_t r, int64_t c) const { return d + r * cols + c; }
  __m256 load(int64_t r, int64_t c) const { return _mm256_loadu_ps(d + r * cols + c); }
  float at(int64_t r, int64_t c) const { return d[r * cols + c]; }
  float scale_at(int64_t, int64_t) const { return 1.0f; }
};

struct Bf16Format {
  static constexpr int64_t kGroup = 0;
  static constexpr int kBits = 16;
  const uint16_t* d;
  int64_t cols;
  explicit Bf16Format(const QMatrix& W) : d(static_cast<const uint16_t*>(W.data)), cols(W.cols) {}
  const void* ptr(int64_t r, int64_t c) const { return d + r * cols + c; }
  __m256 load(int64_t r, int64_t c) const {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(d + r * cols + c));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  float at(int64_t r, int64_t c) const { return bf16_value(d[r * cols + c]); }
  float scale_at(int64_t, int64_t) const { return 1.0f; }
};

// e4m3fn -> fp16 by moving the 7 exponent/mantissa bits under fp16's (bias 15
// instead of 7, so the value is 2^-8 of the e4m3 value, subnormals included),
// then F16C. scale_at carries the 2^8 back (exact: a power of two).
// The NaN codes 0x7f/0xff decode as +-480 here (checkpoints hold no NaN).
struct Fp8Format {
  static constexpr int64_t kGroup = 128;
  static constexpr int kBits = 8;
  const uint8_t* d;
  const float* s;
  int64_t cols, scale_cols, row0;
  explicit Fp8Format(const QMatrix& W)
      : d(static_cast<const uint8_t*>(W.data)), s(static_cast<const float*>(W.scale)), cols(W.cols),
        scale_cols(W.scale_cols), row0(W.scale_row0) {}
  static __m128i to_f16(__m128i bytes_sign_extended_to_16) {
    return _mm_and_si128(_mm_slli_epi16(bytes_sign_extended_to_16, 7), _mm_set1_epi16(int16_t(0xBFFF)));
  }
  const void* ptr(int64_t r, int64_t c) const { return d + r * cols + c; }
  __m256 load(int64_t r, int64_t c) const {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(d + r * cols + c));
    return _mm256_cvtph_ps(to_f16(_mm_cvtepi8_epi16(b)));
  }
  // Columns [c, c + 16): the same values as load(r, c), load(r, c + 8), one wide decode.
  void load16(int64_t r, int64_t c, __m256& lo, __m256& hi) const {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(d + r * cols + c));
    const __m256i h = _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(b), 7),
                                       _mm256_set1_epi16(int16_t(0xBFFF)));
    lo = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
    hi = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
  }
  float at(int64_t r, int64_t c) const {
    const int16_t v = int16_t(int8_t(d[r * cols + c]));
    return _cvtsh_ss(uint16_t((uint16_t(v) << 7) & 0xBFFF));
  }
  float scale_at(int64_t r, int64_t c) const { return s[((row0 + r) >> 7) * scale_cols + (c >> 7)] * 256.0f; }
};

// int4: one 32-bit word holds columns 8j..8j+7 (column 8j+i in bits 4i..4i+3, as q+8).
struct Int4Format {
  static constexpr int64_t kGroup = 32;
  static constexpr int kBits = 4;
  const uint32_t* d;
  const uint16_t* s;
  int64_t cols, scale_cols;
  explicit Int4Format(const QMatrix& W)
      : d(static_cast<const uint32_t*>(W.data)), s(static_cast<const uint16_t*>(W.scale)), cols(W.cols),
        scale_cols(W.scale_cols) {}
  const void* ptr(int64_t r, int64_t c) const { return d + ((r * cols + c) >> 3); }
  __m256 load(int64_t r, int64_t c) const {
    __m256i w = _mm256_set1_epi32(int(d[(r * cols + c) >> 3]));
    w = _mm256_srlv_epi32(w, _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
    w = _mm256_and_si256(w, _mm256_set1_epi32(15));
    return _mm256_cvtepi32_ps(_mm256_sub_epi32(w, _mm256_set1_epi32(8)));
  }
  // The 8 nibbles as stored, 0..15 (q + 8): load = nibbles - 8.
  __m256 load_nibbles(int64_t r, int64_t c) const {
    __m256i w = _mm256_set1_epi32(int(d[(r * cols + c) >> 3]));
    w = _mm256_srlv_epi32(w, _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
    return _mm256_cvtepi32_ps(_mm256_and_si256(w, _mm256_set1_epi32(15)));
  }
  float at(int64_t r, int64_t c) const {
    return float(int((d[(r * cols + c) >> 3] >> (4 * (c & 7))) & 15u) - 8);
  }
  float scale_at(int64_t r, int64_t c) const { return bf16_value(s[r * scale_cols + (c >> 5)]); }
  // scale_at(r, c) in every lane (the bf16 broadcast, then moved to the top half).
  __m256 scale_vec(int64_t r, int64_t c) const {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_set1_epi16(int16_t(s[r * scale_cols + (c >> 5)])), 16));
  }
};

// int8: q as stored, one bf16 scale per 32 columns of a row.
struct Int8Format {
  static constexpr int64_t kGroup = 32;
  static constexpr int kBits = 8;
  const int8_t* d;
  const uint16_t* s;
  int64_t cols, scale_cols;
  explicit Int8Format(const QMatrix& W)
      : d(static_cast<const int8_t*>(W.data)), s(static_cast<const uint16_t*>(W.scale)), cols(W.cols),
        scale_cols(W.scale_cols) {}
  const void* ptr(int64_t r, int64_t c) const { return d + r * cols + c; }
  __m256 load(int64_t r, int64_t c) const {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(d + r * cols + c));
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
  }
  float at(int64_t r, int64_t c) const { return float(d[r * cols + c]); }
  float scale_at(int64_t r, int64_t c) const { return bf16_value(s[r * scale_cols + (c >> 5)]); }
  // out[j] = scale_at(r, c + 32 j), j < 8: one vector conversion for 8 groups.
  void scales8(int64_t r, int64_t c, float* out) const {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + r * scale_cols + (c >> 5)));
    _mm256_store_ps(out, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
  }
};

// Calls fn(Format(W)) with the decoder of W's format.
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
}  // namespace trillion::avx2
