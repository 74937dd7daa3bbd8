// INT4_G32 weights on the exact float path with AVX-512, in the avx512
// table: the transposed product (y = x . W: the absorbed attention's q_lat =
// W_UK^T q_nope) and the rows product at n <= 3 (decode: W_UV, and every
// INT4 matrix under --activations f32). Every other format and shape goes
// to the AVX2 kernels (matmul_t_avx2.cpp, matmul_avx2.cpp), but FP8, INT8
// and BF16's transposed product (matmul_t_avx512.cpp).
//
// Why: W_UK and W_UV stay on the exact float path at decode, and on the
// bench model (INT4, batch 1, int8 path) the AVX2 kernels made them a large
// part of a step, streaming far below the bandwidth: the AVX2 INT4 decode
// costs 5 operations per 8 weights, and the transposed tile keeps one row per
// fma latency in flight. These kernels cut both (bench_model --floor,
// alternated with TRILLION_ISA=avx2-vnni).
//
// Per output element both kernels perform the AVX2 kernels' operations in
// the same order, on the same exact values, so the bits are the AVX2 table's
// (tests/kernels/test_matmul_t.cpp and test_matmul.cpp compare them bit for
// bit):
// - transposed: for r increasing, acc = fma(nibble - 8, x[t][r] * scale,
//   acc). 16 bytes of a row (one 32-column scale group) zero-extend to 16
//   int32 lanes; the low nibble of each lane indexes a 16-entry table of the
//   floats -8..7 (vpermps reads the index's low 4 bits), the lane shifted
//   right by 4 indexes it again: the group's even and odd columns, 4
//   operations per 32 weights. A tile is 4 groups (128 columns, 8 chains per
//   token; 8 groups at one token), and prefetches 16 rows ahead: over a
//   head's block (which fits L2) the first tile prefetches whole rows, so
//   the tiles after it read from cache (int4_token_tile).
// - rows: Int4Weights' chain (matmul_avx2_shared.hpp): per row one 8-lane
//   accumulator over the row's 8-column chunks in order, acc = fma(fma(nibble,
//   s, -8 s), x, acc), then hsum. Two rows share a zmm (one per half), so
//   each instruction serves two rows; a tile is 4 rows a quarter of the range
//   apart, as the AVX2 tile, prefetching the next row's block.
//
// Built with AVX-512 flags, as matmul_t_avx512.cpp (avx512_float_path.hpp);
// runs only after the CPUID check (cpu_has_avx512_vnni).
#include <algorithm>

#include "kernels/x86/avx512_float_path.hpp"

namespace trillion::avx2 {

namespace {

using namespace avx512_float;  // the shared tile constants and prefetch

// Columns [c, c + 32 G) (G whole scale groups) for tokens [t0, t0 + TT).
// Prefetches bytes [b0, b1) of each row kPrefetchRows ahead.
template <int TT, int G>
void int4_cols_tile(const QMatrix& W, const float* x, float* y, int64_t t0, int64_t c, int64_t b0, int64_t b1) {
  const int64_t rows = W.rows, cols = W.cols;
  const uint8_t* d = static_cast<const uint8_t*>(W.data) + c / 2;
  const uint16_t* s = static_cast<const uint16_t*>(W.scale) + c / 32;
  const __m512 values = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
  __m512 even[TT][G], odd[TT][G];  // columns c + 32 g + 2 j and + 2 j + 1 in lane j
  for (int t = 0; t < TT; ++t)
    for (int g = 0; g < G; ++g) even[t][g] = odd[t][g] = _mm512_setzero_ps();
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = d + r * (cols / 2);
    const uint16_t* rs = s + r * W.scale_cols;
    for (int64_t o = b0; o < b1; o += 64)  // (the row's start is d - c / 2 + r * cols / 2)
      prefetch(address(row) + uintptr_t(kPrefetchRows * (cols / 2) + o - c / 2));
    for (int g = 0; g < G; ++g) {
      // Byte j of the group holds columns 2j (low nibble) and 2j + 1 (high).
      const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 16 * g)));
      const __m512 we = _mm512_permutexvar_ps(b, values);
      const __m512 wo = _mm512_permutexvar_ps(_mm512_srli_epi32(b, 4), values);
      const float sc = bf16_value(rs[g]);
      for (int t = 0; t < TT; ++t) {
        const __m512 xs = _mm512_set1_ps(x[(t0 + t) * rows + r] * sc);
        even[t][g] = _mm512_fmadd_ps(we, xs, even[t][g]);
        odd[t][g] = _mm512_fmadd_ps(wo, xs, odd[t][g]);
      }
    }
  }
  // Back to column order: unpack gives, per 128-bit lane i, columns 8i..8i+3
  // (lo) and 8i+4..8i+7 (hi); one two-source permute per 16 columns.
  const __m512i first = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i second = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
  for (int t = 0; t < TT; ++t)
    for (int g = 0; g < G; ++g) {
      const __m512 lo = _mm512_unpacklo_ps(even[t][g], odd[t][g]), hi = _mm512_unpackhi_ps(even[t][g], odd[t][g]);
      float* out = y + (t0 + t) * cols + c + 32 * g;
      _mm512_storeu_ps(out, _mm512_permutex2var_ps(lo, first, hi));
      _mm512_storeu_ps(out + 16, _mm512_permutex2var_ps(lo, second, hi));
    }
}

// The first tile over the rows prefetches each row's whole range when the
// range's rows fit in L2 (a head's W_UK: 128 rows x 256 bytes), so the
// tiles after it read from cache, and the first has the whole row's lines
// in flight, not its own 128 bytes; otherwise each tile its own lines.
// (Faster on W_UK of the bench model's layers, cache flushed before each;
// the whole block prefetched at once to L2 instead measured slower.)
template <int TT>
int64_t int4_token_tile(const QMatrix& W, const float* x, float* y, int64_t t0, int64_t c0, int64_t c1) {
  const int64_t end = std::min(c1, W.cols) & ~int64_t(31);  // whole groups only
  const bool whole = (end - c0) / 2 * W.rows <= (256 << 10);
  int64_t c = c0;
  auto tile = [&](auto fn, int64_t width) {  // prefetching row bytes [b0, b1)
    int64_t b0 = c / 2, b1 = (c + width) / 2;
    if (whole) b0 = c == c0 ? c0 / 2 : 0, b1 = c == c0 ? end / 2 : 0;
    fn(W, x, y, t0, c, b0, b1);
    c += width;
  };
  if constexpr (TT == 1)  // 16 chains (faster than 8 on the bench model's W_UK)
    while (c + 256 <= end) tile(int4_cols_tile<TT, 8>, 256);
  while (c + 128 <= end) tile(int4_cols_tile<TT, 4>, 128);
  while (c + 32 <= end) tile(int4_cols_tile<TT, 1>, 32);
  return c;
}

// Rows wr0 + i wrs (i < 4) times tokens [0, TT): rows 2p and 2p + 1 of the
// tile in the halves of one zmm (p < P = 2); x's chunk broadcast to both
// halves. Each half is Int4Weights' chain for its row. (8-row tiles, 4
// chains, measured no faster on W_UV's 128 x 512.)
template <int TT, int P = 2>
void int4_rows_tile(const QMatrix& W, const float* x, float* y, int64_t ldy, int64_t wr0, int64_t wrs) {
  const int64_t cols = W.cols, row_bytes = cols / 2;
  const uint8_t* d = static_cast<const uint8_t*>(W.data);
  const uint16_t* s = static_cast<const uint16_t*>(W.scale);
  const __m512i shifts = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28);
  const __m512i mask = _mm512_set1_epi32(15);
  const __m512 minus8 = _mm512_set1_ps(-8.0f);
  __m512 acc[P][TT];
  for (int p = 0; p < P; ++p)
    for (int t = 0; t < TT; ++t) acc[p][t] = _mm512_setzero_ps();
  const uint8_t* rp[2 * P];
  const uint16_t* sp[2 * P];
  for (int i = 0; i < 2 * P; ++i) rp[i] = d + (wr0 + i * wrs) * row_bytes, sp[i] = s + (wr0 + i * wrs) * W.scale_cols;
  constexpr int64_t kBlock = 512;  // columns per prefetch block: 256 bytes of each row, as the AVX2 tile
  // Each stream's row at least 1 KB ahead: the next row (the AVX2 tile's
  // prefetch_next_tile) for rows of 1 KB or more; for short rows (W_UV's
  // 256 bytes) one row ahead kept too few lines in flight (W_UV measured as
  // W_UK above: faster in every round).
  const int64_t ahead = std::max<int64_t>(1, 1024 / row_bytes) * row_bytes;
  for (int64_t c = 0; c < cols; c += 32) {
    if (c % kBlock == 0)
      for (int i = 0; i < 2 * P; ++i)
        for (int64_t o = 0; o < std::min(kBlock, cols - c) / 2; o += 64)
          prefetch(address(rp[i]) + uintptr_t(ahead + c / 2 + o));
    for (int p = 0; p < P; ++p) {
      // The group's 16 bytes of the low row in bits 0-127, of the high row in 256-383.
      const __m512i bytes = _mm512_inserti64x4(
          _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rp[2 * p] + c / 2))),
          _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rp[2 * p + 1] + c / 2))), 1);
      const __m512 sc = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(bf16_value(sp[2 * p][c / 32]))),
                                           _mm256_set1_ps(bf16_value(sp[2 * p + 1][c / 32])), 1);
      const __m512 off = _mm512_mul_ps(sc, minus8);  // -8 s: exact, as group_scale
      for (int k = 0; k < 4; ++k) {
        // Word k of each row (columns c + 8k .. + 7) in every lane of its half.
        const __m512i word = _mm512_permutexvar_epi32(_mm512_setr_epi32(k, k, k, k, k, k, k, k, 8 + k, 8 + k, 8 + k,
                                                                        8 + k, 8 + k, 8 + k, 8 + k, 8 + k),
                                                      bytes);
        const __m512 nib = _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srlv_epi32(word, shifts), mask));
        const __m512 w = _mm512_fmadd_ps(nib, sc, off);
        for (int t = 0; t < TT; ++t) {
          const __m512 xv = _mm512_broadcast_f32x8(_mm256_loadu_ps(x + t * cols + c + 8 * k));
          acc[p][t] = _mm512_fmadd_ps(w, xv, acc[p][t]);
        }
      }
    }
  }
  for (int p = 0; p < P; ++p)
    for (int t = 0; t < TT; ++t) {
      y[t * ldy + wr0 + 2 * p * wrs] = hsum(_mm512_castps512_ps256(acc[p][t]));
      y[t * ldy + wr0 + (2 * p + 1) * wrs] = hsum(_mm512_extractf32x8_ps(acc[p][t], 1));
    }
}

// Rows [r0, r1): tiles of 4 rows a quarter of the range apart (4 sequential
// streams, as rows_direct_tiles), AVX2's tile for the last (r1 - r0) % 4.
// Which tile a row is in never changes its operations.
template <int TT>
void int4_rows(const QMatrix& W, const float* x, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  const int64_t q = (r1 - r0) / 4;
  for (int64_t k = 0; k < q; ++k) int4_rows_tile<TT>(W, x, y, ldy, r0 + k, q);
  if (r0 + 4 * q < r1) matmul_rows(W, x, TT, y, ldy, r0 + 4 * q, r1);
}

}  // namespace

void matmul_rows_avx512(const QMatrix& W, const float* x, int64_t n, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  if (W.format != MatFormat::INT4_G32 || n > 3) return matmul_rows(W, x, n, y, ldy, r0, r1);
  if (n == 1) int4_rows<1>(W, x, y, ldy, r0, r1);
  if (n == 2) int4_rows<2>(W, x, y, ldy, r0, r1);
  if (n == 3) int4_rows<3>(W, x, y, ldy, r0, r1);
}

// INT4_G32 only (matmul_t_avx512.cpp dispatches). INT4 rows are whole
// 32-column groups (qmatrix.hpp), so row r starts at byte r * cols / 2.
void int4_matmul_t_cols_avx512(const QMatrix& W, const float* x, int64_t n, float* y, int64_t c0, int64_t c1) {
  int64_t t = 0, done = c0;
  for (; t + kMaxToks <= n; t += kMaxToks) done = int4_token_tile<kMaxToks>(W, x, y, t, c0, c1);
  if (n - t == 2) done = int4_token_tile<2>(W, x, y, t, c0, c1);
  if (n - t == 1) done = int4_token_tile<1>(W, x, y, t, c0, c1);
  // Columns past the last whole group (none while INT4 rows are whole
  // groups): the AVX2 kernel (done is a multiple of 32, as its contract asks).
  if (done < c1) matmul_t_cols(W, x, n, y, done, c1);
}

}  // namespace trillion::avx2
