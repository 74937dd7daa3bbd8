// y = x . W^T for every weight matrix of the model, in one place: the
// compute path (exact or fast, --activations) is chosen here and nowhere else.
//   f32:  float32 activations, float32 accumulation (kernels/matmul.hpp), every format;
//   int8: activations quantized per token to int8 in groups of 32, exact
//         integer dot products (kernels/matmul_q8.hpp) for INT8_G32 and
//         INT4_G32 weights (FP8 models get INT8_G32 weights by requantizing
//         at load: store/int8_source.hpp); BF16 and F32 stay on f32.
// Either way a row's bits depend only on that row and the weights.
#pragma once
#include <cstdint>
#include <string>

#include "common/thread_pool.hpp"
#include "config/model_config.hpp"
#include "kernels/qmatrix.hpp"

namespace trillion {

struct Q8Rows;  // kernels/matmul_q8.hpp

enum class Activations : uint8_t { f32, int8 };
Activations parse_activations(const std::string& s);  // "f32" | "int8"; throws InputError
const char* to_string(Activations a);
// The --activations flag for a model stored as `f`: "auto" (the default) is
// int8 for INT8 and INT4 models, as in every peer engine, and f32 for BF16
// and FP8 (no int8 copy in memory, the same bits on every CPU: linear.cpp);
// "f32" and "int8" as given.
Activations resolve_activations(const std::string& flag, WeightFormat f);
// Whether a model stored as `f` on path `a` reads its FP8 linears as int8
// copies (store/int8_source.hpp), which cost memory of their own.
inline bool requantizes_fp8(Activations a, WeightFormat f) {
  return a == Activations::int8 && f == WeightFormat::fp8_block;
}

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
// linear_pair on the int8 path with x already quantized so (a caller that
// sends one row to several pairs quantizes it once): the same bits.
void linear_pair_q8(const QMatrix& A, float* ya, const QMatrix& B, float* yb, const Q8Rows& xq, ThreadPool* pool);

}  // namespace trillion
