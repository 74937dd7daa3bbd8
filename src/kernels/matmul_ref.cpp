// Scalar reference twins of the matmul kernels: one multiply-add per element
// in index order, weights dequantized to float (value * scale, rounded once).
// Slow and obvious on purpose; tests compare every fast path with these.
#include "kernels/decode_scalar.hpp"
#include "kernels/matmul.hpp"

namespace trillion {

void matmul_ref(const QMatrix& W, const float* x, int64_t n, float* y) {
  check_qmatrix(W);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t r = 0; r < W.rows; ++r) {
      float acc = 0.0f;
      for (int64_t c = 0; c < W.cols; ++c) {
        const float w = detail::dequantized(W, r, c);
        acc += w * x[t * W.cols + c];
      }
      y[t * W.rows + r] = acc;
    }
}

void matmul_t_ref(const QMatrix& W, const float* x, int64_t n, float* y) {
  check_qmatrix(W);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t c = 0; c < W.cols; ++c) {
      float acc = 0.0f;
      for (int64_t r = 0; r < W.rows; ++r) {
        const float w = detail::dequantized(W, r, c);
        acc += x[t * W.rows + r] * w;
      }
      y[t * W.cols + c] = acc;
    }
}

}  // namespace trillion
