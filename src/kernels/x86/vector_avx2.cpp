// AVX2 dot and axpy for attention over the cache, and exp.
#include <cmath>
#include <cstring>

#include "kernels/expf.hpp"
#include "kernels/kernel_table.hpp"
#include "kernels/x86/avx2_formats.hpp"

namespace trillion {
namespace avx2 {

// Two 8-lane accumulators over i = 16k + j (and one more 8-step into the first),
// added lane-wise, hsum's tree, then the tail in order.
float dot(const float* a, const float* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  if (i + 8 <= n) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    i += 8;
  }
  float s = hsum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// y[i] = fma(alpha, x[i], y[i]) for every i, vector or tail alike, so an
// element's bits do not depend on n.
void axpy(float alpha, const float* x, float* y, int64_t n) {
  const __m256 a = _mm256_set1_ps(alpha);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(a, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] = std::fma(alpha, x[i], y[i]);
}

// exp_f32 (expf.hpp) on 4 lanes of double per ymm, 8 floats a step: the
// same operations in the same order, so the same bits. A step with any lane
// out of the fast path's range (|x| >= 88, NaN, infinities: rare in a
// softmax, whose arguments are <= 0 and mostly > -88) runs exp_f32 on each;
// the last n % 8 go through a zero-padded step.
namespace {

inline __m128 exp4(__m128 xf) {
  using namespace expf_consts;
  const __m256d xd = _mm256_cvtps_pd(xf);
  __m256d kd = _mm256_fmadd_pd(_mm256_set1_pd(kInvLn2N), xd, _mm256_set1_pd(kShift));
  const __m256i ki = _mm256_castpd_si256(kd);
  kd = _mm256_sub_pd(kd, _mm256_set1_pd(kShift));
  const __m256d r = _mm256_fmsub_pd(_mm256_set1_pd(kInvLn2N), xd, kd);
  const __m256i idx = _mm256_and_si256(ki, _mm256_set1_epi64x(31));
  const __m256i t = _mm256_add_epi64(
      _mm256_i64gather_epi64(reinterpret_cast<const long long*>(kTable), idx, 8), _mm256_slli_epi64(ki, 47));
  const __m256d z = _mm256_fmadd_pd(_mm256_set1_pd(kC0), r, _mm256_set1_pd(kC1));
  const __m256d r2 = _mm256_mul_pd(r, r);
  __m256d y = _mm256_fmadd_pd(_mm256_set1_pd(kC2), r, _mm256_set1_pd(1.0));
  y = _mm256_fmadd_pd(z, r2, y);
  return _mm256_cvtpd_ps(_mm256_mul_pd(y, _mm256_castsi256_pd(t)));
}

inline void exp8(const float* x, float* y) {
  const __m256 v = _mm256_loadu_ps(x);
  const __m256i out = _mm256_cmpgt_epi32(_mm256_and_si256(_mm256_castps_si256(v), _mm256_set1_epi32(0x7fffffff)),
                                         _mm256_set1_epi32(int32_t(expf_consts::kLastFastAbsBits)));
  if (!_mm256_testz_si256(out, out)) {
    for (int j = 0; j < 8; ++j) y[j] = exp_f32(x[j]);
    return;
  }
  const __m128 lo = exp4(_mm256_castps256_ps128(v)), hi = exp4(_mm256_extractf128_ps(v, 1));
  _mm256_storeu_ps(y, _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1));
}

}  // namespace

void exp_each(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) exp8(x + i, y + i);
  if (i < n) {
    float buf[8] = {};
    std::memcpy(buf, x + i, size_t(n - i) * sizeof(float));
    exp8(buf, buf);
    std::memcpy(y + i, buf, size_t(n - i) * sizeof(float));
  }
}

}  // namespace avx2
}  // namespace trillion
