// Products of a stored-format weight matrix with float activations. Weights
// are dequantized in registers, never expanded in memory.
//
// Determinism contract (docs/determinism.md): y[t][r] is
// bit-identical whatever n is, whatever the thread count, and whatever other
// rows x holds. Threads split output rows (columns for matmul_t), never the
// reduction. The path (portable or AVX2) is fixed per process (isa.hpp).
#pragma once
#include <cstdint>

#include "common/thread_pool.hpp"
#include "kernels/qmatrix.hpp"

namespace trillion {

// y[n, W.rows] = x[n, W.cols] . W^T, output rows split over the pool's threads.
void matmul(const QMatrix& W, const float* x, int64_t n, float* y, ThreadPool& pool);

// The same on the calling thread, with output row stride ldy >= W.rows
// (y[t*ldy + r]), for writing a column slice of a wider output. Same bits as matmul.
void matmul_serial(const QMatrix& W, const float* x, int64_t n, float* y, int64_t ldy);

// y[n, W.cols] = x[n, W.rows] . W (the transposed product: y = sum_r x[r] W[r][:],
// r in increasing order). For the absorbed attention's q_lat = W_UK^T q_nope.
void matmul_t(const QMatrix& W, const float* x, int64_t n, float* y, ThreadPool& pool);
void matmul_t_serial(const QMatrix& W, const float* x, int64_t n, float* y);

// Scalar references (one multiply-add per element, index order, weights
// dequantized to float): the twins tests compare the fast paths with.
void matmul_ref(const QMatrix& W, const float* x, int64_t n, float* y);
void matmul_t_ref(const QMatrix& W, const float* x, int64_t n, float* y);

}  // namespace trillion

namespace trillion {

// out[W.cols] = row r of W dequantized (stored value * scale, rounded once):
// embedding lookups.
void dequantize_row(const QMatrix& W, int64_t r, float* out);

}  // namespace trillion
