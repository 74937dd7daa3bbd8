// exp_f32 (expf.hpp) with AVX-512: 8 lanes of double per zmm, the 32-entry
// table in four zmm (two vpermt2q and a blend by index bit 4 instead of a
// gather). The same operations in the same order as the scalar definition
// and the AVX2 kernel, so the same bits; steps with a lane out of the fast
// path's range run exp_f32 on each, the last n % 8 a masked step.
//
// Built with AVX-512 flags (as matmul_q8_avx512.cpp); runs only after the
// CPUID check (cpu_has_avx512_vnni).
#include "kernels/x86/avx512_intrinsics.hpp"  // first: <immintrin.h>, GCC 12's warnings from it silenced

#include "kernels/expf.hpp"

namespace trillion::avx2 {

void exp_each_avx512(const float* x, float* y, int64_t n) {
  using namespace expf_consts;
  const __m512i t0 = _mm512_loadu_si512(kTable), t1 = _mm512_loadu_si512(kTable + 8),
                t2 = _mm512_loadu_si512(kTable + 16), t3 = _mm512_loadu_si512(kTable + 24);
  const __m512d inv = _mm512_set1_pd(kInvLn2N), shift = _mm512_set1_pd(kShift);
  for (int64_t i = 0; i < n; i += 8) {
    const __mmask8 m = n - i >= 8 ? __mmask8(0xff) : __mmask8((1u << (n - i)) - 1);
    const __m256 v = _mm256_maskz_loadu_ps(m, x + i);  // padding lanes are 0: in range
    const __m256i abs = _mm256_and_si256(_mm256_castps_si256(v), _mm256_set1_epi32(0x7fffffff));
    if (_mm256_cmpgt_epi32_mask(abs, _mm256_set1_epi32(int32_t(kLastFastAbsBits)))) {
      for (int64_t j = i; j < i + 8 && j < n; ++j) y[j] = exp_f32(x[j]);
      continue;
    }
    const __m512d xd = _mm512_cvtps_pd(v);
    __m512d kd = _mm512_fmadd_pd(inv, xd, shift);
    const __m512i ki = _mm512_castpd_si512(kd);
    kd = _mm512_sub_pd(kd, shift);
    const __m512d r = _mm512_fmsub_pd(inv, xd, kd);
    // vpermt2q reads index bits 0-3: entries 0-15 from (t0, t1), 16-31 from (t2, t3).
    const __m512i lo = _mm512_permutex2var_epi64(t0, ki, t1), hi = _mm512_permutex2var_epi64(t2, ki, t3);
    const __mmask8 upper = _mm512_test_epi64_mask(ki, _mm512_set1_epi64(16));
    const __m512i t = _mm512_add_epi64(_mm512_mask_blend_epi64(upper, lo, hi), _mm512_slli_epi64(ki, 47));
    const __m512d z = _mm512_fmadd_pd(_mm512_set1_pd(kC0), r, _mm512_set1_pd(kC1));
    const __m512d r2 = _mm512_mul_pd(r, r);
    __m512d yv = _mm512_fmadd_pd(_mm512_set1_pd(kC2), r, _mm512_set1_pd(1.0));
    yv = _mm512_fmadd_pd(z, r2, yv);
    _mm256_mask_storeu_ps(y + i, m, _mm512_cvtpd_ps(_mm512_mul_pd(yv, _mm512_castsi512_pd(t))));
  }
}

}  // namespace trillion::avx2
