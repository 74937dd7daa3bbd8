// arm64 NEON dot and axpy for attention over the cache.
#include <arm_neon.h>

#include <cmath>
#include <cstdint>

namespace trillion {
namespace neon {

// Four 4-lane accumulators over i = 16k + 4j + lane (a last 4-, 8- or 12-step
// goes into acc0, acc1, acc2 in turn), added (0+1)+(2+3) lane-wise, lanes
// (0+2)+(1+3), then the tail in order: a fixed blocking for a given n.
float dot(const float* a, const float* b, int64_t n) {
  float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 4; ++j) acc[j] = vfmaq_f32(acc[j], vld1q_f32(a + i + 4 * j), vld1q_f32(b + i + 4 * j));
  for (int j = 0; i + 4 <= n; i += 4, ++j) acc[j] = vfmaq_f32(acc[j], vld1q_f32(a + i), vld1q_f32(b + i));
  const float32x4_t v = vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3]));
  const float32x2_t p = vadd_f32(vget_low_f32(v), vget_high_f32(v));  // (0+2), (1+3)
  float s = vget_lane_f32(p, 0) + vget_lane_f32(p, 1);
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// y[i] = fma(alpha, x[i], y[i]) for every i, vector or tail alike, so an
// element's bits do not depend on n.
void axpy(float alpha, const float* x, float* y, int64_t n) {
  const float32x4_t a = vdupq_n_f32(alpha);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vfmaq_f32(vld1q_f32(y + i), a, vld1q_f32(x + i)));
  for (; i < n; ++i) y[i] = std::fma(alpha, x[i], y[i]);
}

}  // namespace neon
}  // namespace trillion
