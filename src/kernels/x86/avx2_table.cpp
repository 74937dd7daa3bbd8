// The AVX2 kernel tables: plain, and with the integer-dot product on AVX-VNNI
// or AVX-512 VNNI. Built without ISA flags: it only takes addresses of the
// functions in the x86 kernel files, which run only after the CPUID checks.
#include "kernels/kernel_table.hpp"

namespace trillion {
namespace avx2 {
void matmul_rows(const QMatrix& W, const float* x, int64_t n, float* y, int64_t ldy, int64_t r0, int64_t r1);
void matmul_t_cols(const QMatrix& W, const float* x, int64_t n, float* y, int64_t c0, int64_t c1);
void matmul_rows_avx512(const QMatrix& W, const float* x, int64_t n, float* y, int64_t ldy, int64_t r0, int64_t r1);
void matmul_t_cols_avx512(const QMatrix& W, const float* x, int64_t n, float* y, int64_t c0, int64_t c1);
float dot(const float* a, const float* b, int64_t n);
void axpy(float alpha, const float* x, float* y, int64_t n);
void quantize_q8_row(const float* x, int64_t cols, int8_t* q, float* d);
void matmul_q8_rows(const QMatrix& W, const Q8Rows& xq, float* y, int64_t ldy, int64_t r0, int64_t r1);
void matmul_q8_rows_vnni(const QMatrix& W, const Q8Rows& xq, float* y, int64_t ldy, int64_t r0, int64_t r1);
void matmul_q8_rows_avx512(const QMatrix& W, const Q8Rows& xq, float* y, int64_t ldy, int64_t r0, int64_t r1);
void dot_tile(const float* a, int64_t lda, int64_t na, const float* b, int64_t ldb, int64_t nb, int64_t n, float* out,
              int64_t ldo, const float* b_next);
void axpy_tile(const float* p, int64_t ldp, int64_t na, const float* x, int64_t ldx, int64_t nb, float* y, int64_t ldy,
               int64_t n);
void dot_tile_avx512(const float* a, int64_t lda, int64_t na, const float* b, int64_t ldb, int64_t nb, int64_t n,
                     float* out, int64_t ldo, const float* b_next);
void axpy_tile_avx512(const float* p, int64_t ldp, int64_t na, const float* x, int64_t ldx, int64_t nb, float* y,
                      int64_t ldy, int64_t n);
void exp_each(const float* x, float* y, int64_t n);
void exp_each_avx512(const float* x, float* y, int64_t n);
}  // namespace avx2

namespace {
constexpr KernelTable kAvx2 = {avx2::matmul_rows,     avx2::matmul_t_cols,  avx2::dot,      avx2::axpy,
                               avx2::quantize_q8_row, avx2::matmul_q8_rows, avx2::dot_tile, avx2::axpy_tile,
                               avx2::exp_each};
// The same with the integer-dot product on AVX-VNNI (same bits).
constexpr KernelTable kAvx2Vnni = {avx2::matmul_rows,     avx2::matmul_t_cols,       avx2::dot,      avx2::axpy,
                                   avx2::quantize_q8_row, avx2::matmul_q8_rows_vnni, avx2::dot_tile, avx2::axpy_tile,
                                   avx2::exp_each};
// And with the integer-dot product on AVX-512 VNNI, the exact path's decode
// products and attention's tiles on AVX-512 (matmul_int4_avx512.cpp,
// matmul_t_avx512.cpp, attention_tiles_avx512.cpp, exp_avx512.cpp; same bits).
constexpr KernelTable kAvx512 = {avx2::matmul_rows_avx512,       avx2::matmul_t_cols_avx512, avx2::dot,
                                 avx2::axpy,                     avx2::quantize_q8_row,      avx2::matmul_q8_rows_avx512,
                                 avx2::dot_tile_avx512,          avx2::axpy_tile_avx512,     avx2::exp_each_avx512};
}  // namespace

const KernelTable* avx2_kernel_table() { return &kAvx2; }
const KernelTable* avx512_kernel_table() { return &kAvx512; }
const KernelTable* avx2_vnni_kernel_table() { return &kAvx2Vnni; }

}  // namespace trillion
