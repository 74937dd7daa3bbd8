// Portable dot/axpy and the portable kernel table.
#include "kernels/expf.hpp"
#include "kernels/kernel_table.hpp"
#include "kernels/tile_loops.hpp"

namespace trillion {

void portable_matmul_rows(const QMatrix& W, const float* x, int64_t n, float* y, int64_t ldy, int64_t r0,
                          int64_t r1);
void portable_matmul_t_cols(const QMatrix& W, const float* x, int64_t n, float* y, int64_t c0, int64_t c1);
void portable_quantize_q8_row(const float* x, int64_t cols, int8_t* q, float* d);
void portable_matmul_q8_rows(const QMatrix& W, const Q8Rows& xq, float* y, int64_t ldy, int64_t r0, int64_t r1);

namespace {

// 8 lanes over i = 8k + j, summed in a fixed tree, then the tail in order.
float portable_dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

void portable_axpy(float alpha, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

void portable_dot_tile(const float* a, int64_t lda, int64_t na, const float* b, int64_t ldb, int64_t nb, int64_t n,
                       float* out, int64_t ldo, const float* /*b_next: no prefetching here*/) {
  dot_tile_loop(portable_dot, a, lda, na, b, ldb, nb, n, out, ldo);
}

void portable_axpy_tile(const float* p, int64_t ldp, int64_t na, const float* x, int64_t ldx, int64_t nb, float* y,
                        int64_t ldy, int64_t n) {
  axpy_tile_loop(portable_axpy, p, ldp, na, x, ldx, nb, y, ldy, n);
}

constexpr KernelTable kPortable = {portable_matmul_rows,     portable_matmul_t_cols,  portable_dot,      portable_axpy,
                                   portable_quantize_q8_row, portable_matmul_q8_rows, portable_dot_tile, portable_axpy_tile,
                                   exp_f32_each};

}  // namespace

const KernelTable& portable_kernel_table() { return kPortable; }

}  // namespace trillion
