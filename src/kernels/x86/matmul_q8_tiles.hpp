// The AVX2 integer-dot register tiles (matmul_q8.hpp defines the arithmetic
// to the bit), shared by the files that build them: matmul_q8_avx2.cpp
// (exact int32 lane sums by vpmaddubsw + vpmaddwd), matmul_q8_vnni.cpp (the
// same sums by AVX-VNNI's vpdpbusd) and matmul_q8_avx512.cpp (its one-token
// tiles). A `Dot` policy gives the lane sums:
//   int8_lanes(a, b): lane k = sum_{j<4} a[4k+j] * b[4k+j]  (a unsigned, b signed bytes)
//   int4_lanes(lo, xe, hi, xo, pc): lane k = sum_{j<4} lo[4k+j] xe[4k+j] + hi[4k+j] xo[4k+j] - pc[k]
// Both are exact integers whichever instructions compute them, and every
// float step around them is here, once: so the two files give the same bits.
//
// INT8_G32: a 32-column group of one weight row is one ymm of int8. With the
// activations' group q: vpsignb moves the weights' sign onto q, so the
// unsigned operand is |w|; lane k holds the exact sum over columns
// 4k..4k+3, as the definition asks. One fma per lane adds it times (weight
// scale * activation scale). Register tiles of R rows x T tokens share each
// loaded group; every tile performs the same operations per output, so
// tiles, n and threads never change a bit.
//
// INT4_G32: one 256-bit load is a pair of groups (64 columns). A mask and a
// shift give their even and their odd columns' nibbles as stored (w + 8,
// unsigned); multiplied with the even and the odd activations of the pair
// layout and summed per lane, less pc = 8 q: the definition's isum_k.
// Against unpacking each group to column order (two unpacks and an insert)
// and converting its scale alone, one token costs 15 instructions per pair
// and row instead of about 33 (decode's n = 1 product streams the faster for
// it).
//
// Included only by files built with -mavx2 -mfma -mf16c (plus their VNNI
// flags); internal linkage, as avx2_formats.hpp.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/matmul_q8.hpp"
#include "kernels/x86/avx2_formats.hpp"

namespace trillion::avx2 {
namespace {

// A software prefetch of the line at `a` one row on (row_bytes further): the
// hardware prefetchers restart at every 4 KiB page, and a tile of 4 rows of
// an expert's 2 KiB (INT8) or 1 KiB (INT4) rows crosses pages every few rows
// (as matmul_avx2.cpp's prefetch_next_tile). An integer address: past the
// matrix it is never dereferenced (prefetches do not fault).
inline void prefetch_next_row(uintptr_t a, int64_t row_bytes) {
  _mm_prefetch(reinterpret_cast<const char*>(a + uintptr_t(row_bytes)), _MM_HINT_T0);
}

// INT4's rows are half as long (1 KiB for a 2048-column expert matrix, 256
// bytes for its down projection), so one row on is too close to cover the
// memory latency: its tiles prefetch at least 2 KiB ahead in each stream
// (scales too). On the bench model's INT4 batch 1 (alternated runs) 2 KiB
// was faster than one row or 1 KiB on both the AVX-512 and the AVX2 tile,
// and 4 KiB slower. INT8 (2 KiB rows but the down projection's 512 bytes)
// gained nothing from it: it keeps one row.
constexpr int64_t kInt4PrefetchBytes = 2048;
inline void prefetch_int4_ahead(uintptr_t a, int64_t row_bytes) {
  prefetch_next_row(a, std::max(row_bytes, kInt4PrefetchBytes));
}

// Group g of row r as 32 int8 weights (INT8_G32).
inline __m256i load_group(const QMatrix& W, int64_t r, int64_t g) {
  const int8_t* p = static_cast<const int8_t*>(W.data) + r * W.cols + g * kQ8Group;
  const int64_t left = W.cols - g * kQ8Group;
  if (left >= kQ8Group) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  alignas(32) int8_t buf[kQ8Group] = {};  // the row's partial last group; never read past its end
  std::memcpy(buf, p, size_t(left));
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(buf));
}

// One INT8_G32 group of one row (its 32 weights w, aw = |w| computed once
// per row by the caller for all its tokens, its scale ws) times one token's
// group (q: xs, d_g: d), into the row's 8-lane accumulator: the definition's
// step. |w| times the activations with w's sign (vpsignb):
// vpmaddubsw and vpdpbusd want one unsigned operand. This way round, not |x|
// times sign(w, x): a weight of -128 has |w| = 128 as an unsigned byte,
// while negating it would wrap; activations lie in [-127, 127], so their
// negation never does. Every int8 weight is computed exactly.
template <class Dot>
inline void int8_group(__m256i aw, __m256i w, __m256 ws, __m256i xs, __m256 d, __m256& acc) {
  const __m256i p = Dot::int8_lanes(aw, _mm256_sign_epi8(xs, w));
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(ws, d), acc);
}

// Rows wr0 + i wrs (i < R) of W times tokens [t0, t0 + T), into y rows
// yr0 + i yrs. Strided rows (wrs = a quarter of the range) make the tile's
// sweep read R sequential streams, which the prefetchers follow (see
// matmul_avx2.cpp's rows_direct_tiles for the measurements).
template <class Dot, int R, int T, bool Pf = false>
void tile(const QMatrix& W, const Q8Rows& xq, int64_t wr0, int64_t wrs, int64_t t0, float* y, int64_t ldy,
          int64_t yr0, int64_t yrs) {
  const uint16_t* wscale = static_cast<const uint16_t*>(W.scale);
  const uintptr_t w0 = reinterpret_cast<uintptr_t>(W.data) + uintptr_t(wr0 * W.cols);
  __m256 acc[R][T];
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < T; ++t) acc[i][t] = _mm256_setzero_ps();
  for (int64_t g = 0; g < xq.groups; ++g) {
    __m256i xs[T];
    __m256 d[T];
    for (int t = 0; t < T; ++t) {
      xs[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq.row_q(t0 + t) + g * kQ8Group));
      d[t] = _mm256_set1_ps(xq.row_d(t0 + t)[g]);
    }
    if constexpr (Pf) {
      if (g % 2 == 0)  // one 64-byte line: this group and the next
        for (int i = 0; i < R; ++i) prefetch_next_row(w0 + uintptr_t(i * wrs * W.cols + g * kQ8Group), W.cols);
      if (g % 32 == 0)  // the next row's scales: 32 groups to a line
        for (int i = 0; i < R; ++i)
          prefetch_next_row(reinterpret_cast<uintptr_t>(wscale + (wr0 + i * wrs) * W.scale_cols + g), 2 * W.scale_cols);
    }
    for (int i = 0; i < R; ++i) {
      const __m256i w = load_group(W, wr0 + i * wrs, g);
      const __m256i aw = _mm256_sign_epi8(w, w);  // |w|; -128 stays 0x80 = 128 unsigned
      const __m256 ws = _mm256_set1_ps(bf16_value(wscale[(wr0 + i * wrs) * W.scale_cols + g]));
      for (int t = 0; t < T; ++t) int8_group<Dot>(aw, w, ws, xs[t], d[t], acc[i][t]);
    }
  }
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < T; ++t) y[(t0 + t) * ldy + yr0 + i * yrs] = hsum(acc[i][t]);  // avx2_formats.hpp: the definition's tree
}

// One INT4_G32 pair of one row (its 32 bytes at w, its two scales at sc)
// times T <= 2 tokens' pair records x0, x1, into accumulators a0, a1.
// `lone`: the pair is only group 2p (16 bytes, never read past the row; its
// lanes 4..7 kept as they are, as the definition says).
template <class Dot, int T, bool lone>
inline void int4_pair(const uint8_t* w, const uint16_t* sc, const Q8Pair* x0, const Q8Pair* x1, __m256& a0,
                      __m256& a1) {
  const __m256i nib = _mm256_set1_epi8(0x0F);
  __m256i b;
  __m256 ws;
  if constexpr (lone) {
    b = _mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w)));
    ws = _mm256_set1_ps(bf16_value(sc[0]));
  } else {
    b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w));
    // Two bf16 scales (groups 2p, 2p + 1) in one int32, broadcast: lanes 0-3
    // take the low half shifted up, lanes 4-7 the high half in place, both
    // masked to a float.
    uint32_t two;
    std::memcpy(&two, sc, 4);
    const __m256i shift = _mm256_setr_epi32(16, 16, 16, 16, 0, 0, 0, 0);
    ws = _mm256_castsi256_ps(_mm256_and_si256(_mm256_sllv_epi32(_mm256_set1_epi32(int32_t(two)), shift),
                                              _mm256_set1_epi32(int32_t(0xFFFF0000u))));
  }
  const __m256i lo = _mm256_and_si256(b, nib), hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), nib);
  auto token = [&](const Q8Pair* x, __m256& acc) {
    const __m256i xe = _mm256_load_si256(reinterpret_cast<const __m256i*>(x->e));
    const __m256i xo = _mm256_load_si256(reinterpret_cast<const __m256i*>(x->o));
    const __m256i pc = _mm256_load_si256(reinterpret_cast<const __m256i*>(x->c));
    const __m256 d = _mm256_load_ps(x->d);
    const __m256i isum = Dot::int4_lanes(lo, xe, hi, xo, pc);
    const __m256 next = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(ws, d), acc);
    acc = lone ? _mm256_blend_ps(next, acc, 0xF0) : next;
  };
  token(x0, a0);
  if constexpr (T == 2) token(x1, a1);
}

// INT4_G32, rows wr0 + i wrs (i < R, R = 1 or 4) times tokens [t0, t0 + T).
// Row and token base pointers are set once, so the loop only steps them.
// Named accumulators: GCC keeps an array of them on the stack. (At 4 x 2 it
// spills some anyway, as memory operands of the fma; two 2 x 2 tiles
// instead, with none spilled, measured no faster.)
template <class Dot, int R, int T, bool Pf = false>
void int4_tile(const QMatrix& W, const Q8Rows& xq, int64_t wr0, int64_t wrs, int64_t t0, float* y, int64_t ldy,
               int64_t yr0, int64_t yrs) {
  static_assert(R == 1 || R == 4);
  const int64_t wstep = wrs * (W.cols / 2), sstep = wrs * W.scale_cols;  // bytes, scales from one tile row to the next
  const uint8_t* w = static_cast<const uint8_t*>(W.data) + wr0 * (W.cols / 2);
  const uint16_t* sc = static_cast<const uint16_t*>(W.scale) + wr0 * W.scale_cols;
  const Q8Pair* x0 = xq.row_pairs(t0);
  const Q8Pair* x1 = T == 2 ? xq.row_pairs(t0 + 1) : x0;
  __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00;
  auto pair = [&]<bool lone>(int64_t p) {
    const uint8_t* wp = w + 32 * p;
    const uint16_t* sp = sc + 2 * p;
    if constexpr (Pf) {
      if (p % 2 == 0)  // one 64-byte line: this pair and the next
        for (int i = 0; i < R; ++i) prefetch_int4_ahead(reinterpret_cast<uintptr_t>(wp + i * wstep), W.cols / 2);
      if (p % 16 == 0)  // the scales: 16 pairs to a line
        for (int i = 0; i < R; ++i) prefetch_int4_ahead(reinterpret_cast<uintptr_t>(sp + i * sstep), 2 * W.scale_cols);
    }
    int4_pair<Dot, T, lone>(wp, sp, x0 + p, x1 + p, a00, a01);
    if constexpr (R == 4) {
      int4_pair<Dot, T, lone>(wp + wstep, sp + sstep, x0 + p, x1 + p, a10, a11);
      int4_pair<Dot, T, lone>(wp + 2 * wstep, sp + 2 * sstep, x0 + p, x1 + p, a20, a21);
      int4_pair<Dot, T, lone>(wp + 3 * wstep, sp + 3 * sstep, x0 + p, x1 + p, a30, a31);
    }
  };
  const int64_t whole = xq.groups / 2;
  for (int64_t p = 0; p < whole; ++p) pair.template operator()<false>(p);
  if (whole < xq.pairs) pair.template operator()<true>(whole);
  const __m256 out[4][2] = {{a00, a01}, {a10, a11}, {a20, a21}, {a30, a31}};
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < T; ++t) y[(t0 + t) * ldy + yr0 + i * yrs] = hsum(out[i][t]);
}

template <class Dot, MatFormat F, int R>
void rows_all_tokens(const QMatrix& W, const Q8Rows& xq, int64_t wr0, int64_t wrs, float* y, int64_t ldy, int64_t yr0,
                     int64_t yrs) {
  // One token streams each row once: its tiles prefetch the next row tile's
  // lines. With more tokens the later tiles find the rows in cache.
  int64_t t = 0;
  if constexpr (F == MatFormat::INT8_G32) {
    if (xq.n == 1) return tile<Dot, R, 1, true>(W, xq, wr0, wrs, 0, y, ldy, yr0, yrs);
    for (; t + 2 <= xq.n; t += 2) tile<Dot, R, 2>(W, xq, wr0, wrs, t, y, ldy, yr0, yrs);
    if (t < xq.n) tile<Dot, R, 1>(W, xq, wr0, wrs, t, y, ldy, yr0, yrs);
  } else {
    if (xq.n == 1) return int4_tile<Dot, R, 1, true>(W, xq, wr0, wrs, 0, y, ldy, yr0, yrs);
    for (; t + 2 <= xq.n; t += 2) int4_tile<Dot, R, 2>(W, xq, wr0, wrs, t, y, ldy, yr0, yrs);
    if (t < xq.n) int4_tile<Dot, R, 1>(W, xq, wr0, wrs, t, y, ldy, yr0, yrs);
  }
}

// Rows [r0, r1) in tiles of 4 rows a quarter of the range apart, the last
// (r1 - r0) % 4 rows one at a time. Which tile a row is in never changes its
// operations, so neither its bits.
template <class Dot, MatFormat F>
void matmul_rows_q8(const QMatrix& W, const Q8Rows& xq, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  const int64_t q = (r1 - r0) / 4;
  for (int64_t k = 0; k < q; ++k) rows_all_tokens<Dot, F, 4>(W, xq, r0 + k, q, y, ldy, r0 + k, q);
  for (int64_t r = r0 + 4 * q; r < r1; ++r) rows_all_tokens<Dot, F, 1>(W, xq, r, 1, y, ldy, r, 1);
}

// The whole product over rows [r0, r1), INT8_G32 or INT4_G32.
template <class Dot>
void matmul_q8_rows_with(const QMatrix& W, const Q8Rows& xq, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  if (W.format == MatFormat::INT8_G32) matmul_rows_q8<Dot, MatFormat::INT8_G32>(W, xq, y, ldy, r0, r1);
  else matmul_rows_q8<Dot, MatFormat::INT4_G32>(W, xq, y, ldy, r0, r1);
}

}  // namespace
}  // namespace trillion::avx2
