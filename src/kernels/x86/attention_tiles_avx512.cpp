// AVX-512 dot_tile / axpy_tile for the avx512 table: attention over a cache
// block as 512-bit register tiles, each output with exactly the bits of
// avx2::dot / axpy (the table's own dot and axpy).
//
// Why: at long context attention is compute-bound (bench_attention: 15 FLOP
// per cache byte at 16 heads), and the AVX2 tiles issue 256-bit FMAs. A core
// with full-width AVX-512 (Zen 5 here) does twice the multiply-adds per
// 512-bit FMA; on one with two 256-bit passes (Zen 4) only the larger tiles
// (32 zmm: 24 accumulators) could help, and they have not been timed there.
//
// Bits. avx2::dot keeps acc0 over columns 16k..16k+7 (and one more 8-column
// step) and acc1 over 16k+8..16k+15, then hsum(acc0 + acc1) and the tail in
// order. One zmm over columns 16k..16k+15 holds acc0 in its low half and acc1
// in its high half, with the same FMA per lane; the odd 8-column step is a
// masked FMA on the low half; the halves are added and reduced by the same
// hsum. axpy is elementwise (y = fma(p, x, y) per element, positions in
// order), so any vector width gives its bits. tests/kernels compares every
// tile and edge with the loops over dot and axpy bit for bit.
//
// Built with AVX-512 flags; runs only after the CPUID check (cpu_has_avx512_vnni).
#include "kernels/x86/avx512_intrinsics.hpp"  // first: <immintrin.h>, GCC 12's warnings from it silenced

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/x86/avx2_formats.hpp"

namespace trillion::avx2 {

namespace {

// hsum(lo + hi) of 16 accumulators q[0..15] (lo, hi: a zmm's 256-bit
// halves, dot's acc0 and acc1) at once. hsum's tree halves the lanes at each
// level (16 -> 8: lane i + lane i + 8; 8 -> 4: i + i + 4; 4 -> 2: i + i + 2;
// 2 -> 1: 0 + 1); here each level adds the same pairs of lanes, two or more
// outputs per add, their lanes brought side by side by shuffles: the same
// bits with ~3 instructions per output instead of ~9 (the reduction of the
// 64-column rope scores cost as much as their FMAs). Lane 4k + m of the
// result is q[4m + k]'s sum.
__attribute__((always_inline)) inline __m512 reduce16(const __m512 (&q)[16]) {
  // 16 -> 8: chunks (0, 1) + (2, 3) of a and of b: [a's 8 | b's 8].
  auto halve32 = [](__m512 a, __m512 b) {
    return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
  };
  // 8 -> 4, on two of those: chunk 0 + chunk 1 of each output, 4 outputs' 4 lanes.
  auto halve16 = [](__m512 a, __m512 b) {
    return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x88), _mm512_shuffle_f32x4(a, b, 0xDD));
  };
  // 4 -> 2 and 2 -> 1 within each 128-bit chunk, two chunks' outputs per add.
  auto halve4 = [](__m512 a, __m512 b) { return _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x44), _mm512_shuffle_ps(a, b, 0xEE)); };
  auto halve2 = [](__m512 a, __m512 b) { return _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x88), _mm512_shuffle_ps(a, b, 0xDD)); };
  const __m512 u0 = halve32(q[0], q[1]), u1 = halve32(q[2], q[3]), u2 = halve32(q[4], q[5]), u3 = halve32(q[6], q[7]),
               u4 = halve32(q[8], q[9]), u5 = halve32(q[10], q[11]), u6 = halve32(q[12], q[13]),
               u7 = halve32(q[14], q[15]);
  // v0's chunk k is q[k]'s 4 lanes, v1's q[4 + k]'s, ...
  const __m512 v0 = halve16(u0, u1), v1 = halve16(u2, u3), v2 = halve16(u4, u5), v3 = halve16(u6, u7);
  return halve2(halve4(v0, v1), halve4(v2, v3));
}

// out[i * ldo + j] = dot(a_i, b_j) for i < A, j < B. The accumulators are a
// fully unrolled array (the loops have constant bounds). Each 16-column step
// also prefetches Lines lines from `next` on (then moves past them): into L1
// (Far = false) the rows of b the next tile reads, or into L2 (Far) a share
// of the next call's block. `next` is an integer: never dereferenced.
template <int A, int B, int Lines, bool Far>
__attribute__((always_inline)) inline void dot_block(const float* a, int64_t lda, const float* b, int64_t ldb,
                                                     int64_t n, float* out, int64_t ldo, uintptr_t next) {
  const int64_t n16 = n / 16 * 16;
  __m512 t[A][B];
#pragma GCC unroll 8
  for (int i = 0; i < A; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < B; ++j) t[i][j] = _mm512_setzero_ps();
  for (int64_t c = 0; c < n16; c += 16, next += Lines * 64) {
#pragma GCC unroll 8
    for (int k = 0; k < Lines; ++k) _mm_prefetch(reinterpret_cast<const char*>(next + 64 * k), Far ? _MM_HINT_T1 : _MM_HINT_T0);
    __m512 av[A];
#pragma GCC unroll 8
    for (int i = 0; i < A; ++i) av[i] = _mm512_loadu_ps(a + i * lda + c);
#pragma GCC unroll 8
    for (int j = 0; j < B; ++j) {
      const __m512 bv = _mm512_loadu_ps(b + j * ldb + c);
#pragma GCC unroll 8
      for (int i = 0; i < A; ++i) t[i][j] = _mm512_fmadd_ps(av[i], bv, t[i][j]);
    }
  }
  int64_t tail = n16;
  if (n - n16 >= 8) {  // dot's odd 8-column step, into acc0 (the low half) only
    const __mmask16 lo = 0x00FF;
    __m512 av[A];
#pragma GCC unroll 8
    for (int i = 0; i < A; ++i) av[i] = _mm512_maskz_loadu_ps(lo, a + i * lda + n16);
#pragma GCC unroll 8
    for (int j = 0; j < B; ++j) {
      const __m512 bv = _mm512_maskz_loadu_ps(lo, b + j * ldb + n16);
#pragma GCC unroll 8
      for (int i = 0; i < A; ++i) t[i][j] = _mm512_mask3_fmadd_ps(av[i], bv, t[i][j], lo);
    }
    tail += 8;
  }
  // Each output's hsum(acc0 + acc1), 16 outputs at a time (reduce16), the
  // missing ones of the last 16 zero.
  constexpr int N = A * B, G = (N + 15) / 16;
  alignas(64) float sums[16 * G];
#pragma GCC unroll 2
  for (int g = 0; g < G; ++g) {
    __m512 q[16];
#pragma GCC unroll 16
    for (int k = 0; k < 16; ++k) q[k] = 16 * g + k < N ? t[(16 * g + k) / B][(16 * g + k) % B] : _mm512_setzero_ps();
    _mm512_store_ps(sums + 16 * g, reduce16(q));
  }
#pragma GCC unroll 8
  for (int i = 0; i < A; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < B; ++j) {
      const int k = (i * B + j) % 16;
      float s = sums[16 * ((i * B + j) / 16) + 4 * (k % 4) + k / 4];
      for (int64_t c = tail; c < n; ++c) s += a[i * lda + c] * b[j * ldb + c];
      out[i * ldo + j] = s;
    }
}

// Rows of a [0, A) against every row of b: B positions at a time, then the
// leftover positions one tile narrower at a time. The first rows of a (far
// = 0) read b from memory: each tile prefetches the next one, a line per
// row and step. The other rows find b in cache, and rows far = 1, 2, 3
// prefetch a third each of the same tile in the next call's block (b_next:
// the address of the next call's b; later rows prefetch further on into
// it), so the first rows' pass over that block waits less on memory (the
// scores from memory ran well below the same over one block in cache; the
// hint made bench_attention faster at 4k and 16k positions, batch 1 and 8).
template <int A, int B>
void dot_rows(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t nb, int64_t n, float* out,
              int64_t ldo, uintptr_t b_next, int64_t far) {
  constexpr int kFarLines = (B + 2) / 3;
  const int64_t share = kFarLines * (n / 16) * 64;  // bytes one far pass prefetches per tile
  int64_t j = 0;
  for (; j + B <= nb; j += B) {
    if (far == 0)
      dot_block<A, B, B, false>(a, lda, b + j * ldb, ldb, n, out + j, ldo,
                                reinterpret_cast<uintptr_t>(b + j * ldb) + uintptr_t(B * ldb) * 4);
    else
      dot_block<A, B, kFarLines, true>(a, lda, b + j * ldb, ldb, n, out + j, ldo,
                                       b_next + uintptr_t(j * ldb) * 4 + uintptr_t((far - 1) * share));
  }
  if constexpr (B > 1) {
    if (j < nb) dot_rows<A, B - 1>(a, lda, b + j * ldb, ldb, nb - j, n, out + j, ldo, b_next + uintptr_t(j * ldb) * 4, far);
  }
}

// Columns [0, 16C) of y rows i < A: for each position j in order,
// y_i = fma(p_ij, x_j, y_i) (axpy's operation per element).
template <int A, int C>
__attribute__((always_inline)) inline void axpy_block(const float* p, int64_t ldp, const float* x, int64_t ldx,
                                                      int64_t nb, float* y, int64_t ldy) {
  __m512 acc[A][C];
#pragma GCC unroll 8
  for (int i = 0; i < A; ++i)
#pragma GCC unroll 8
    for (int k = 0; k < C; ++k) acc[i][k] = _mm512_loadu_ps(y + i * ldy + 16 * k);
  for (int64_t j = 0; j < nb; ++j) {
    __m512 xv[C];
#pragma GCC unroll 8
    for (int k = 0; k < C; ++k) xv[k] = _mm512_loadu_ps(x + j * ldx + 16 * k);
#pragma GCC unroll 8
    for (int i = 0; i < A; ++i) {
      const __m512 pv = _mm512_set1_ps(p[i * ldp + j]);
#pragma GCC unroll 8
      for (int k = 0; k < C; ++k) acc[i][k] = _mm512_fmadd_ps(pv, xv[k], acc[i][k]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < A; ++i)
#pragma GCC unroll 8
    for (int k = 0; k < C; ++k) _mm512_storeu_ps(y + i * ldy + 16 * k, acc[i][k]);
}

// Every row of y, columns [0, 16C): A rows at a time while the columns'
// slice of x (nb x 16C floats) stays in L1, then the leftover rows.
template <int A, int C>
void axpy_columns(const float* p, int64_t ldp, int64_t na, const float* x, int64_t ldx, int64_t nb, float* y,
                  int64_t ldy) {
  int64_t i = 0;
  for (; i + A <= na; i += A) axpy_block<A, C>(p + i * ldp, ldp, x, ldx, nb, y + i * ldy, ldy);
  if constexpr (A > 1) {
    if (i < na) axpy_columns<A - 1, C>(p + i * ldp, ldp, na - i, x, ldx, nb, y + i * ldy, ldy);
  }
}

// 8 columns of y rows [0, na) (the last 8-wide step before axpy's scalar tail).
void axpy_8(const float* p, int64_t ldp, int64_t na, const float* x, int64_t ldx, int64_t nb, float* y,
            int64_t ldy) {
  for (int64_t i = 0; i < na; ++i) {
    __m256 acc = _mm256_loadu_ps(y + i * ldy);
    for (int64_t j = 0; j < nb; ++j) acc = _mm256_fmadd_ps(_mm256_set1_ps(p[i * ldp + j]), _mm256_loadu_ps(x + j * ldx), acc);
    _mm256_storeu_ps(y + i * ldy, acc);
  }
}

}  // namespace

// Scores: 4 heads x 6 positions (24 accumulators, 10 loads per 24 FMAs).
void dot_tile_avx512(const float* a, int64_t lda, int64_t na, const float* b, int64_t ldb, int64_t nb, int64_t n,
                     float* out, int64_t ldo, const float* b_next) {
  const uintptr_t next = reinterpret_cast<uintptr_t>(b_next ? b_next : b);
  int64_t i = 0;
  for (; i + 4 <= na; i += 4) dot_rows<4, 6>(a + i * lda, lda, b, ldb, nb, n, out + i * ldo, ldo, next, i / 4);
  switch (na - i) {  // the last 1-3 rows
    case 3: dot_rows<3, 6>(a + i * lda, lda, b, ldb, nb, n, out + i * ldo, ldo, next, i / 4); break;
    case 2: dot_rows<2, 6>(a + i * lda, lda, b, ldb, nb, n, out + i * ldo, ldo, next, i / 4); break;
    case 1: dot_rows<1, 6>(a + i * lda, lda, b, ldb, nb, n, out + i * ldo, ldo, next, i / 4); break;
    default: break;
  }
}

// Weighted sums: 6 heads x 64 columns (24 accumulators, 4 loads and 6
// broadcasts per 24 FMAs) while the block's positions go by.
void axpy_tile_avx512(const float* p, int64_t ldp, int64_t na, const float* x, int64_t ldx, int64_t nb, float* y,
                      int64_t ldy, int64_t n) {
  const int64_t n16 = n / 16 * 16;
  int64_t c = 0;
  for (; c + 64 <= n16; c += 64) axpy_columns<6, 4>(p, ldp, na, x + c, ldx, nb, y + c, ldy);
  switch ((n16 - c) / 16) {
    case 3: axpy_columns<6, 3>(p, ldp, na, x + c, ldx, nb, y + c, ldy); break;
    case 2: axpy_columns<6, 2>(p, ldp, na, x + c, ldx, nb, y + c, ldy); break;
    case 1: axpy_columns<6, 1>(p, ldp, na, x + c, ldx, nb, y + c, ldy); break;
    default: break;
  }
  c = n16;
  if (n - c >= 8) {
    axpy_8(p, ldp, na, x + c, ldx, nb, y + c, ldy);
    c += 8;
  }
  for (int64_t i = 0; i < na; ++i)  // axpy's scalar tail, position by position
    for (int64_t j = 0; j < nb; ++j)
      for (int64_t k = c; k < n; ++k) y[i * ldy + k] = std::fma(p[i * ldp + j], x[j * ldx + k], y[i * ldy + k]);
}

}  // namespace trillion::avx2
