// Element-wise and per-row kernels: norms, activations, softmax, dot/axpy.
// Reductions run in a fixed order (index order unless stated), so a row's
// result depends only on that row.
#pragma once
#include <cstdint>

#include "common/dtype.hpp"

namespace trillion {

// A stored weight vector (norm weights, biases): F32 or BF16, used in place.
struct VecView {
  DType dtype = DType::F32;
  const void* data = nullptr;
  int64_t size = 0;
  float operator[](int64_t i) const;  // converted to float
};

// out[i] = (x[i] * r) * w[i], r = 1 / sqrt(mean(x^2) + eps), for i < w.size.
// The sum of squares is accumulated in double, in index order; r rounded once
// to float (as HF computes in float32: x * rsqrt(var + eps), then * weight).
// out may alias x.
void rmsnorm(const float* x, const VecView& w, double eps, float* out);

// exp is exp_f32 (expf.hpp: glibc's expf, the same bits on every path and platform).
float sigmoid(float x);   // 1 / (1 + exp(-x))
float silu(float x);      // x / (1 + exp(-x))

// y[i] = exp_f32(x[i]) for i < n, vectorized where the path can (y may alias x).
void exp_each(const float* x, float* y, int64_t n);

// In place: x[i] = sigmoid(x[i]), its bits, the exp a block at a time
// through the vector kernel (the router's scores).
void sigmoid_each(float* x, int64_t n);

// out[i] = silu(gate[i]) * up[i]. out may alias gate or up.
void swiglu(const float* gate, const float* up, int64_t n, float* out);

// In place: x[i] = exp(x[i] - max) / sum, the sum accumulated in double in
// index order. n >= 1.
void softmax(float* x, int64_t n);
// softmax() that also returns the row's max and its sum of exponentials (what
// a chunked attention needs to merge chunks); the same bits in x.
void softmax_stats(float* x, int64_t n, float& max, double& sum);
// softmax_stats of rows x + r * ld (r < rows, n >= 1 each) into max[r] and
// sum[r]: each row's bits are softmax_stats' (faster than a call per row).
void softmax_stats_rows(float* x, int64_t ld, int64_t rows, int64_t n, float* max, double* sum);

// y[i] += x[i].
void add(float* y, const float* x, int64_t n);

// The process's dot / axpy (fixed blocking per path; see kernel_table.hpp).
float dot(const float* a, const float* b, int64_t n);
void axpy(float alpha, const float* x, float* y, int64_t n);  // y[i] += alpha * x[i]

// Tiles of them over shared operands, each output with exactly dot's / axpy's
// bits (register-tiled where the path has a tiled kernel):
//   out[i*ldo + j] = dot(a + i*lda, b + j*ldb, n)                  i < na, j < nb
//   for i < na, j < nb in order: axpy(p[i*ldp + j], x + j*ldx, y + i*ldy, n)
// b_next: where the next call's b starts, a prefetch hint (kernel_table.hpp).
void dot_tile(const float* a, int64_t lda, int64_t na, const float* b, int64_t ldb, int64_t nb, int64_t n, float* out,
              int64_t ldo, const float* b_next = nullptr);
void axpy_tile(const float* p, int64_t ldp, int64_t na, const float* x, int64_t ldx, int64_t nb, float* y, int64_t ldy,
               int64_t n);

}  // namespace trillion
