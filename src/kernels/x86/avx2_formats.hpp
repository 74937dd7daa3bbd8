// AVX2 decoders of the five weight formats: 8 consecutive columns of one row
// to 8 floats in a register. Included only by files built with
// -mavx2 -mfma -mf16c; everything here has internal linkage, so no
// AVX2-compiled inline function can leak into portable code through the linker.
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "kernels/format_fields.hpp"
#include "kernels/qmatrix.hpp"

namespace trillion::avx2 {
namespace {

// Sum of the 8 lanes in a fixed tree: (lo + hi) halves, then pairs.
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Each format: its fields (kernels/format_fields.hpp: kGroup, kBits, ptr,
// at, scale_at) and load(r, c), 8 values from column c (c % 8 == 0) scaled
// as at() is.

struct F32Format : F32Fields {
  using F32Fields::F32Fields;
  __m256 load(int64_t r, int64_t c) const { return _mm256_loadu_ps(d + r * cols + c); }
};

struct Bf16Format : Bf16Fields {
  using Bf16Fields::Bf16Fields;
  __m256 load(int64_t r, int64_t c) const {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(d + r * cols + c));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
};

// e4m3fn -> fp16 bits (format_fields.hpp), then F16C.
struct Fp8Format : Fp8Fields {
  using Fp8Fields::Fp8Fields;
  static __m128i to_f16(__m128i bytes_sign_extended_to_16) {
    return _mm_and_si128(_mm_slli_epi16(bytes_sign_extended_to_16, 7), _mm_set1_epi16(int16_t(0xBFFF)));
  }
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
  float at(int64_t r, int64_t c) const { return _cvtsh_ss(f16_bits(r, c)); }
};

struct Int4Format : Int4Fields {
  using Int4Fields::Int4Fields;
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
  // scale_at(r, c) in every lane (the bf16 broadcast, then moved to the top half).
  __m256 scale_vec(int64_t r, int64_t c) const {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_set1_epi16(int16_t(s[r * scale_cols + (c >> 5)])), 16));
  }
};

struct Int8Format : Int8Fields {
  using Int8Fields::Int8Fields;
  __m256 load(int64_t r, int64_t c) const {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(d + r * cols + c));
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
  }
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
