// AVX2 dot_tile / axpy_tile (kernel_table.hpp): attention over a cache block
// as register tiles, each output with exactly the bits of avx2::dot / axpy.
//
// Why: attention's scores and weighted sums, one dot or axpy per (head,
// position), issue two loads per FMA (three memory operations for axpy),
// so they ran at ~18% of the FMA peak. A tile shares each loaded vector:
// dot_tile holds 3 rows of a x 4 rows of b (12 accumulators, dot's two
// chains one after the other), axpy_tile 4 rows of y x 24 columns (12
// accumulators) while it walks the positions. Each output's operations and their order are
// dot's / axpy's, so the bits are theirs (tests/kernels compare them).
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/x86/avx2_formats.hpp"

namespace trillion::avx2 {

namespace {

// out[i * ldo + j] = dot(a_i, b_j) for i < A, j < B, as vector_avx2.cpp's dot:
// acc0 over columns 16k..16k+7 (then one more 8-column step), acc1 over
// 16k+8..16k+15, hsum(acc0 + acc1), then the tail in order. The two chains
// never meet before the end, so they run one after the other: one live
// accumulator per output, a 3 x 4 tile in 12 registers, 7 loads per 12 FMAs.
template <int A, int B>
void dot_block(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t n, float* out, int64_t ldo) {
  const int64_t n16 = n / 16 * 16;
  __m256 acc[2][A][B];
  for (int chain = 0; chain < 2; ++chain) {
    __m256 t[A][B];
    for (int i = 0; i < A; ++i)
      for (int j = 0; j < B; ++j) t[i][j] = _mm256_setzero_ps();
    const int64_t end = chain == 0 && n - n16 >= 8 ? n16 + 8 : n16;  // acc0 takes the odd 8-column step
    for (int64_t c = 8 * chain; c < end; c += 16) {
      __m256 av[A];
      for (int i = 0; i < A; ++i) av[i] = _mm256_loadu_ps(a + i * lda + c);
      for (int j = 0; j < B; ++j) {
        const __m256 bv = _mm256_loadu_ps(b + j * ldb + c);
        for (int i = 0; i < A; ++i) t[i][j] = _mm256_fmadd_ps(av[i], bv, t[i][j]);
      }
    }
    for (int i = 0; i < A; ++i)
      for (int j = 0; j < B; ++j) acc[chain][i][j] = t[i][j];
  }
  const int64_t tail = n - n16 >= 8 ? n16 + 8 : n16;
  for (int i = 0; i < A; ++i)
    for (int j = 0; j < B; ++j) {
      float s = hsum(_mm256_add_ps(acc[0][i][j], acc[1][i][j]));
      for (int64_t k = tail; k < n; ++k) s += a[i * lda + k] * b[j * ldb + k];
      out[i * ldo + j] = s;
    }
}

// One chain of dot_block<3, 4> (columns c0, c0 + 16, ... below end) with
// named accumulators (an array of them is mirrored on the stack by GCC, a
// store per FMA); the 12 totals are written to `out` once.
void dot_chain_3x4(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t c0, int64_t end,
                   __m256 (&out)[3][4]) {
  __m256 t00 = _mm256_setzero_ps(), t01 = t00, t02 = t00, t03 = t00, t10 = t00, t11 = t00, t12 = t00, t13 = t00,
         t20 = t00, t21 = t00, t22 = t00, t23 = t00;
  for (int64_t c = c0; c < end; c += 16) {
    const __m256 a0 = _mm256_loadu_ps(a + c), a1 = _mm256_loadu_ps(a + lda + c), a2 = _mm256_loadu_ps(a + 2 * lda + c);
#define COL(j)                                          \
  {                                                     \
    const __m256 bv = _mm256_loadu_ps(b + j * ldb + c); \
    t0##j = _mm256_fmadd_ps(a0, bv, t0##j);             \
    t1##j = _mm256_fmadd_ps(a1, bv, t1##j);             \
    t2##j = _mm256_fmadd_ps(a2, bv, t2##j);             \
  }
    COL(0) COL(1) COL(2) COL(3)
#undef COL
  }
#define COL(j) out[0][j] = t0##j, out[1][j] = t1##j, out[2][j] = t2##j;
  COL(0) COL(1) COL(2) COL(3)
#undef COL
}

void dot_block_3x4(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t n, float* out, int64_t ldo) {
  const int64_t n16 = n / 16 * 16, tail = n - n16 >= 8 ? n16 + 8 : n16;
  __m256 acc0[3][4], acc1[3][4];
  dot_chain_3x4(a, lda, b, ldb, 0, tail, acc0);  // acc0 takes the odd 8-column step
  dot_chain_3x4(a, lda, b, ldb, 8, n16, acc1);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      float s = hsum(_mm256_add_ps(acc0[i][j], acc1[i][j]));
      for (int64_t k = tail; k < n; ++k) s += a[i * lda + k] * b[j * ldb + k];
      out[i * ldo + j] = s;
    }
}

template <int A>
void dot_rows(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t nb, int64_t n, float* out,
              int64_t ldo) {
  int64_t j = 0;
  for (; j + 4 <= nb; j += 4) {
    if constexpr (A == 3) dot_block_3x4(a, lda, b + j * ldb, ldb, n, out + j, ldo);
    else dot_block<A, 4>(a, lda, b + j * ldb, ldb, n, out + j, ldo);
  }
  switch (nb - j) {
    case 3: dot_block<A, 3>(a, lda, b + j * ldb, ldb, n, out + j, ldo); break;
    case 2: dot_block<A, 2>(a, lda, b + j * ldb, ldb, n, out + j, ldo); break;
    case 1: dot_block<A, 1>(a, lda, b + j * ldb, ldb, n, out + j, ldo); break;
    default: break;
  }
}

// Columns [c, c + 8C) of y rows i < A: for each position j in order,
// y_i = fma(p_ij, x_j, y_i) (axpy's operation per element).
template <int A, int C>
void axpy_block(const float* p, int64_t ldp, const float* x, int64_t ldx, int64_t nb, float* y, int64_t ldy) {
  __m256 acc[A][C];
  for (int i = 0; i < A; ++i)
    for (int k = 0; k < C; ++k) acc[i][k] = _mm256_loadu_ps(y + i * ldy + 8 * k);
  for (int64_t j = 0; j < nb; ++j) {
    __m256 xv[C];
    for (int k = 0; k < C; ++k) xv[k] = _mm256_loadu_ps(x + j * ldx + 8 * k);
    for (int i = 0; i < A; ++i) {
      const __m256 pv = _mm256_broadcast_ss(p + i * ldp + j);
      for (int k = 0; k < C; ++k) acc[i][k] = _mm256_fmadd_ps(pv, xv[k], acc[i][k]);
    }
  }
  for (int i = 0; i < A; ++i)
    for (int k = 0; k < C; ++k) _mm256_storeu_ps(y + i * ldy + 8 * k, acc[i][k]);
}

// axpy_block<4, 3> with named accumulators: GCC keeps a 4 x 3 array of
// __m256 mirrored on the stack (a store per FMA), which cost half the rate.
void axpy_block_4x3(const float* p, int64_t ldp, const float* x, int64_t ldx, int64_t nb, float* y, int64_t ldy) {
#define ROW(i) __m256 a##i##0 = _mm256_loadu_ps(y + i * ldy), a##i##1 = _mm256_loadu_ps(y + i * ldy + 8), \
                      a##i##2 = _mm256_loadu_ps(y + i * ldy + 16);
  ROW(0) ROW(1) ROW(2) ROW(3)
#undef ROW
  for (int64_t j = 0; j < nb; ++j) {
    const __m256 x0 = _mm256_loadu_ps(x + j * ldx), x1 = _mm256_loadu_ps(x + j * ldx + 8),
                 x2 = _mm256_loadu_ps(x + j * ldx + 16);
#define ROW(i)                                              \
  {                                                         \
    const __m256 pv = _mm256_broadcast_ss(p + i * ldp + j); \
    a##i##0 = _mm256_fmadd_ps(pv, x0, a##i##0);             \
    a##i##1 = _mm256_fmadd_ps(pv, x1, a##i##1);             \
    a##i##2 = _mm256_fmadd_ps(pv, x2, a##i##2);             \
  }
    ROW(0) ROW(1) ROW(2) ROW(3)
#undef ROW
  }
#define ROW(i)                                \
  _mm256_storeu_ps(y + i * ldy, a##i##0);      \
  _mm256_storeu_ps(y + i * ldy + 8, a##i##1);  \
  _mm256_storeu_ps(y + i * ldy + 16, a##i##2);
  ROW(0) ROW(1) ROW(2) ROW(3)
#undef ROW
}

// Rows [i0, na) of y, columns [c, c + 8C): every row group while the
// columns' slice of x (nb x 8C floats) stays in L1.
template <int C>
void axpy_columns(const float* p, int64_t ldp, int64_t na, const float* x, int64_t ldx, int64_t nb, float* y,
                  int64_t ldy) {
  int64_t i = 0;
  for (; i + 4 <= na; i += 4) {
    if constexpr (C == 3) axpy_block_4x3(p + i * ldp, ldp, x, ldx, nb, y + i * ldy, ldy);
    else axpy_block<4, C>(p + i * ldp, ldp, x, ldx, nb, y + i * ldy, ldy);
  }
  for (; i < na; ++i) axpy_block<1, C>(p + i * ldp, ldp, x, ldx, nb, y + i * ldy, ldy);
}

}  // namespace

void dot_tile(const float* a, int64_t lda, int64_t na, const float* b, int64_t ldb, int64_t nb, int64_t n, float* out,
              int64_t ldo, const float* /*b_next: the AVX-512 tile's prefetch, not measured here*/) {
  int64_t i = 0;
  for (; i + 3 <= na; i += 3) dot_rows<3>(a + i * lda, lda, b, ldb, nb, n, out + i * ldo, ldo);
  if (na - i == 2) dot_rows<2>(a + i * lda, lda, b, ldb, nb, n, out + i * ldo, ldo);
  if (na - i == 1) dot_rows<1>(a + i * lda, lda, b, ldb, nb, n, out + i * ldo, ldo);
}

void axpy_tile(const float* p, int64_t ldp, int64_t na, const float* x, int64_t ldx, int64_t nb, float* y, int64_t ldy,
               int64_t n) {
  const int64_t vec = n / 8 * 8;
  int64_t c = 0;
  for (; c + 24 <= vec; c += 24) axpy_columns<3>(p, ldp, na, x + c, ldx, nb, y + c, ldy);
  if (vec - c == 16) axpy_columns<2>(p, ldp, na, x + c, ldx, nb, y + c, ldy);
  if (vec - c == 8) axpy_columns<1>(p, ldp, na, x + c, ldx, nb, y + c, ldy);
  for (int64_t i = 0; i < na; ++i)  // axpy's scalar tail, position by position
    for (int64_t j = 0; j < nb; ++j)
      for (int64_t k = vec; k < n; ++k) y[i * ldy + k] = std::fma(p[i * ldp + j], x[j * ldx + k], y[i * ldy + k]);
}

}  // namespace trillion::avx2
