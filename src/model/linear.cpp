#include "model/linear.hpp"

#include <atomic>

#include "common/error.hpp"
#include "kernels/matmul.hpp"
#include "kernels/matmul_bf16.hpp"
#include "kernels/matmul_q8.hpp"

namespace trillion {

namespace {
// The quantized rows of the calling thread's current product. Reused across
// calls so decode steps do not allocate; threads never share it.
Q8Rows& scratch() {
  thread_local Q8Rows rows;
  return rows;
}

// The same for the bf16 path's rounded rows.
Bf16Rows& bf16_scratch() {
  thread_local Bf16Rows rows;
  return rows;
}

std::atomic<Bf16Observer> observer{nullptr};

// x rounded for W into the calling thread's rows (shown to the observer, if any).
Bf16Rows& rounded_for(const QMatrix& W, const float* x, int64_t n) {
  Bf16Rows& xb = bf16_scratch();
  round_bf16_rows(x, n, W.cols, xb);
  if (Bf16Observer o = observer.load(std::memory_order_relaxed)) o(W, xb);
  return xb;
}

// Whether `a` computes W on the integer path, or on the bf16 path.
bool uses_int8(Activations a, const QMatrix& W) { return a == Activations::int8 && q8_supports(W.format); }
bool uses_bf16(Activations a, const QMatrix& W) { return a == Activations::bf16 && bf16_supports(W.format); }
}  // namespace

void set_bf16_observer(Bf16Observer o) { observer.store(o); }

void linear(const QMatrix& W, const float* x, int64_t n, float* y, Activations a, ThreadPool& pool) {
  if (uses_bf16(a, W)) return matmul_bf16(W, rounded_for(W, x, n), y, pool);
  if (!uses_int8(a, W)) return matmul(W, x, n, y, pool);
  Q8Rows& xq = scratch();
  quantize_q8(x, n, W.cols, xq, W.format);
  matmul_q8(W, xq, y, pool);
}

void linear_serial(const QMatrix& W, const float* x, int64_t n, float* y, int64_t ldy, Activations a) {
  if (uses_bf16(a, W)) return matmul_bf16_serial(W, rounded_for(W, x, n), y, ldy);
  if (!uses_int8(a, W)) return matmul_serial(W, x, n, y, ldy);
  Q8Rows& xq = scratch();
  quantize_q8(x, n, W.cols, xq, W.format);
  matmul_q8_serial(W, xq, y, ldy);
}

bool pair_uses_int8(const QMatrix& A, const QMatrix& B, Activations a) {
  return uses_int8(a, A) && uses_int8(a, B) && A.cols == B.cols;
}

// INT4 weights read the pair layout, INT8 the plain groups: quantizing for
// INT4 gives both (the layout is added beside the same groups).
MatFormat pair_quantize_format(const QMatrix& A, const QMatrix& B) {
  return A.format == MatFormat::INT4_G32 ? A.format : B.format;
}

void linear_pair_q8(const QMatrix& A, float* ya, const QMatrix& B, float* yb, const Q8Rows& xq, ThreadPool* pool) {
  if (pool) {
    matmul_q8_pair(A, ya, B, yb, xq, *pool);
  } else {
    matmul_q8_serial(A, xq, ya, A.rows);
    matmul_q8_serial(B, xq, yb, B.rows);
  }
}

void linear_pair(const QMatrix& A, float* ya, const QMatrix& B, float* yb, const float* x, int64_t n, Activations a,
                 ThreadPool* pool) {
  if (uses_bf16(a, A) && uses_bf16(a, B) && A.cols == B.cols) {  // x rounded once for both
    const Bf16Rows& xb = rounded_for(A, x, n);
    if (Bf16Observer o = observer.load(std::memory_order_relaxed)) o(B, xb);
    if (pool) {
      matmul_bf16(A, xb, ya, *pool);
      matmul_bf16(B, xb, yb, *pool);
    } else {
      matmul_bf16_serial(A, xb, ya, A.rows);
      matmul_bf16_serial(B, xb, yb, B.rows);
    }
    return;
  }
  if (!pair_uses_int8(A, B, a)) {
    if (pool) {
      linear(A, x, n, ya, a, *pool);
      linear(B, x, n, yb, a, *pool);
    } else {
      linear_serial(A, x, n, ya, A.rows, a);
      linear_serial(B, x, n, yb, B.rows, a);
    }
    return;
  }
  Q8Rows& xq = scratch();
  quantize_q8(x, n, A.cols, xq, pair_quantize_format(A, B));
  linear_pair_q8(A, ya, B, yb, xq, pool);
}

}  // namespace trillion
