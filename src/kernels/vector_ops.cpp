#include "kernels/vector_ops.hpp"

#include <cmath>

#include "common/numeric.hpp"
#include "kernels/kernel_table.hpp"

namespace trillion {

float VecView::operator[](int64_t i) const {
  return dtype == DType::BF16 ? bf16_to_f32(static_cast<const uint16_t*>(data)[i])
                              : static_cast<const float*>(data)[i];
}

void rmsnorm(const float* x, const VecView& w, double eps, float* out) {
  const int64_t n = w.size;
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += double(x[i]) * double(x[i]);
  const float r = float(1.0 / std::sqrt(ss / double(n) + eps));
  if (w.dtype == DType::BF16) {
    const uint16_t* wb = static_cast<const uint16_t*>(w.data);
    for (int64_t i = 0; i < n; ++i) out[i] = (x[i] * r) * bf16_to_f32(wb[i]);
  } else {
    const float* wf = static_cast<const float*>(w.data);
    for (int64_t i = 0; i < n; ++i) out[i] = (x[i] * r) * wf[i];
  }
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

float silu(float x) { return x / (1.0f + std::exp(-x)); }

void swiglu(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = silu(gate[i]) * up[i];
}

void softmax_stats(float* x, int64_t n, float& max, double& sum) {
  float mx = x[0];
  for (int64_t i = 1; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    s += x[i];
  }
  const double inv = 1.0 / s;
  for (int64_t i = 0; i < n; ++i) x[i] = float(double(x[i]) * inv);
  max = mx;
  sum = s;
}

void softmax(float* x, int64_t n) {
  float mx;
  double sum;
  softmax_stats(x, n, mx, sum);
}

void add(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

float dot(const float* a, const float* b, int64_t n) { return active_kernel_table().dot(a, b, n); }

void axpy(float alpha, const float* x, float* y, int64_t n) { active_kernel_table().axpy(alpha, x, y, n); }

void dot_tile(const float* a, int64_t lda, int64_t na, const float* b, int64_t ldb, int64_t nb, int64_t n, float* out,
              int64_t ldo, const float* b_next) {
  active_kernel_table().dot_tile(a, lda, na, b, ldb, nb, n, out, ldo, b_next);
}

void axpy_tile(const float* p, int64_t ldp, int64_t na, const float* x, int64_t ldx, int64_t nb, float* y, int64_t ldy,
               int64_t n) {
  active_kernel_table().axpy_tile(p, ldp, na, x, ldx, nb, y, ldy, n);
}

}  // namespace trillion
