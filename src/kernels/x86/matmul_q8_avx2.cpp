// AVX2 integer-dot kernels: quantizing an activation row, and the product
// with lane sums by vpmaddubsw + vpmaddwd: one token on the tiles of
// matmul_q8_tiles.hpp (they prefetch the weight streams: decode is bound by
// memory), two or more on matmul_q8_gemm_avx2.cpp's (bound by the vector units).
#include <immintrin.h>

#include <cfloat>
#include <cmath>
#include <cstring>

#include "kernels/matmul_q8.hpp"
#include "kernels/q8_scalar.hpp"
#include "kernels/x86/matmul_q8_tiles.hpp"

namespace trillion::avx2 {

void matmul_q8_gemm_rows(const QMatrix& W, const Q8Rows& xq, float* y, int64_t ldy, int64_t r0, int64_t r1);

namespace {

// vpmaddubsw multiplies unsigned by signed bytes and adds pairs to int16
// (INT8: |sum| <= 2*127*127; INT4: <= 2*15*127, and the even plus odd int16
// add <= 4*15*127: no saturation), vpmaddwd by ones adds pairs to int32.
struct MaddDot {
  static __m256i int8_lanes(__m256i a, __m256i b) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), _mm256_set1_epi16(1));
  }
  static __m256i int4_lanes(__m256i lo, __m256i xe, __m256i hi, __m256i xo, __m256i pc) {
    const __m256i s16 = _mm256_add_epi16(_mm256_maddubs_epi16(lo, xe), _mm256_maddubs_epi16(hi, xo));
    return _mm256_sub_epi32(_mm256_madd_epi16(s16, _mm256_set1_epi16(1)), pc);
  }
};

}  // namespace

void quantize_q8_row(const float* x, int64_t cols, int8_t* q, float* d) {
  const __m256 sign = _mm256_set1_ps(-0.0f), big = _mm256_set1_ps(FLT_MAX);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const int64_t full = cols / kQ8Group;
  for (int64_t g = 0; g < full; ++g) {
    const float* xg = x + g * kQ8Group;
    __m256 v[4], amax = _mm256_setzero_ps();
    int finite = 0xFF;
    for (int k = 0; k < 4; ++k) {
      v[k] = _mm256_loadu_ps(xg + 8 * k);
      const __m256 a = _mm256_andnot_ps(sign, v[k]);
      finite &= _mm256_movemask_ps(_mm256_cmp_ps(a, big, _CMP_LE_OQ));  // false for NaN and inf
      amax = _mm256_max_ps(amax, a);
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    const float dg = finite == 0xFF ? _mm_cvtss_f32(m) / 127.0f : NAN;
    d[g] = dg;
    __m256i out = _mm256_setzero_si256();
    if (finite == 0xFF && dg > 0.0f) {
      const __m256 dv = _mm256_set1_ps(dg);
      __m256i i[4];
      for (int k = 0; k < 4; ++k)  // x / d exactly rounded, then to nearest, ties to even
        i[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_div_ps(v[k], dv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]), _mm256_packs_epi32(i[2], i[3]));
      out = _mm256_permutevar8x32_epi32(p, order);  // undo the packs' 128-bit lane interleave
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + g * kQ8Group), out);
  }
  if (full * kQ8Group < cols)  // the partial last group: the same operations, one column at a time
    d[full] = quantize_q8_group_scalar(x, full * kQ8Group, cols, q + full * kQ8Group);
}

void matmul_q8_rows(const QMatrix& W, const Q8Rows& xq, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  if (xq.n >= 2) return matmul_q8_gemm_rows(W, xq, y, ldy, r0, r1);
  matmul_q8_rows_with<MaddDot>(W, xq, y, ldy, r0, r1);
}

}  // namespace trillion::avx2
