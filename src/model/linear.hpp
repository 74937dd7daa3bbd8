// y = x . W^T for every weight matrix of the model, in one place: the
// compute path (exact or fast, --activations: config/activations.hpp) is
// taken here and nowhere else: f32 on kernels/matmul.hpp, int8 on
// kernels/matmul_q8.hpp, bf16 on kernels/matmul_bf16.hpp. Every way a row's
// bits depend only on that row and the weights.
#pragma once
#include <cstdint>
#include <string>

#include "common/thread_pool.hpp"
#include "config/activations.hpp"
#include "kernels/qmatrix.hpp"

namespace trillion {

struct Q8Rows;  // kernels/matmul_q8.hpp

// y[n, W.rows] = x[n, W.cols] . W^T, output rows over the pool's threads.
void linear(const QMatrix& W, const float* x, int64_t n, float* y, Activations a, ThreadPool& pool);
// The same on the calling thread, output row stride ldy (same bits).
void linear_serial(const QMatrix& W, const float* x, int64_t n, float* y, int64_t ldy, Activations a);
// ya = x . A^T and yb = x . B^T, two matrices with one input (an MLP's gate
// and up, attention's q_a and kv_a): on the int8 path x is quantized once,
// not per matrix. The same bits as two linear() calls. pool == nullptr: on
// the calling thread (linear_serial, ldy = the matrix's rows).
void linear_pair(const QMatrix& A, float* ya, const QMatrix& B, float* yb, const float* x, int64_t n, Activations a,
                 ThreadPool* pool);
// Whether linear_pair(A, B) under `a` takes the int8 path, and then the
// format its x is quantized for (quantize_q8(x, n, cols, xq, that format)).
bool pair_uses_int8(const QMatrix& A, const QMatrix& B, Activations a);
MatFormat pair_quantize_format(const QMatrix& A, const QMatrix& B);
// A test seam: an observer that sees every bf16-path product's weights and
// rounded rows (tests/model/hf_logits records them so that the float64
// reference can follow the engine's rounding of activations near a tie).
// Called from pool threads too: the observer synchronizes. Null: none.
struct Bf16Rows;  // kernels/matmul_bf16.hpp
using Bf16Observer = void (*)(const QMatrix& W, const Bf16Rows& xb);
void set_bf16_observer(Bf16Observer observer);
// linear_pair on the int8 path with x already quantized so (a caller that
// sends one row to several pairs quantizes it once): the same bits.
void linear_pair_q8(const QMatrix& A, float* ya, const QMatrix& B, float* yb, const Q8Rows& xq, ThreadPool* pool);

}  // namespace trillion
