#include "kernels/vector_ops.hpp"

#include <algorithm>
#include <cmath>

#include "common/numeric.hpp"
#include "kernels/expf.hpp"
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

float sigmoid(float x) { return 1.0f / (1.0f + exp_f32(-x)); }

float silu(float x) { return x / (1.0f + exp_f32(-x)); }

void exp_each(const float* x, float* y, int64_t n) { active_kernel_table().exp_each(x, y, n); }

namespace {
constexpr int64_t kExpBlock = 256;  // floats per exp_each call of the blocked forms below (on the stack)
}  // namespace

void sigmoid_each(float* x, int64_t n) {
  // sigmoid's operations: the scalar exp_f32 is built without FMA flags and
  // on x86 its fma is a libm call, ~2x the time of the vector kernel's.
  float e[kExpBlock];
  for (int64_t i0 = 0; i0 < n; i0 += kExpBlock) {
    const int64_t m = std::min(kExpBlock, n - i0);
    for (int64_t i = 0; i < m; ++i) e[i] = -x[i0 + i];
    exp_each(e, e, m);
    for (int64_t i = 0; i < m; ++i) x[i0 + i] = 1.0f / (1.0f + e[i]);
  }
}

void swiglu(const float* gate, const float* up, int64_t n, float* out) {
  // silu's operations, exp a block at a time through the vector kernel.
  constexpr int64_t kBlock = kExpBlock;
  float e[kBlock];
  for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
    const int64_t m = std::min(kBlock, n - i0);
    for (int64_t i = 0; i < m; ++i) e[i] = -gate[i0 + i];
    exp_each(e, e, m);
    for (int64_t i = 0; i < m; ++i) out[i0 + i] = gate[i0 + i] / (1.0f + e[i]) * up[i0 + i];
  }
}

void softmax_stats_rows(float* x, int64_t ld, int64_t rows, int64_t n, float* max, double* sum) {
  const KernelTable& k = active_kernel_table();
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * ld;
    float mx = row[0];
    for (int64_t i = 1; i < n; ++i) mx = row[i] > mx ? row[i] : mx;
    for (int64_t i = 0; i < n; ++i) row[i] -= mx;
    k.exp_each(row, row, n);
    max[r] = mx;
    sum[r] = 0.0;
  }
  // Each row's sum in index order, as one chain per row; the rows' chains
  // interleaved a column at a time, so the adds of different rows overlap
  // instead of each waiting out the latency of the last (a row's bits do not
  // change: its own adds keep their order).
  for (int64_t i = 0; i < n; ++i)
    for (int64_t r = 0; r < rows; ++r) sum[r] += double(x[r * ld + i]);
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * ld;
    const double inv = 1.0 / sum[r];
    for (int64_t i = 0; i < n; ++i) row[i] = float(double(row[i]) * inv);
  }
}

void softmax_stats(float* x, int64_t n, float& max, double& sum) { softmax_stats_rows(x, n, 1, n, &max, &sum); }

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
