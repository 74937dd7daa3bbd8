// The AVX2 integer-dot product for many tokens (matmul_q8.hpp defines the
// arithmetic to the bit; this file computes exactly it): an expert's tokens at
// 32 sequences and more, a prefill chunk, a dense layer's batch. The tiles of
// matmul_q8_tiles.hpp, which serve one token best (decode), spend most of an
// output's instructions around its lane sums; here:
//
// - Register tiles of 4 rows x 2 tokens (8 accumulators; the 16 ymm registers
//   also hold the two tokens' groups, the row's weights and |weights|, the
//   ones of vpmaddwd and two temporaries). A row's weights are loaded and
//   their |w| taken once per group for both tokens; a token's group once for
//   all 4 rows.
// - INT8: the scale products s = ws * d (the definition's float32 multiply)
//   are made 8 groups at a time, one vmulps for 8 outputs, into a table the
//   group loop reads with vbroadcastss: the inner step is vpsignb,
//   vpmaddubsw, vpmaddwd, vcvtdq2ps, vfmadd and the broadcast, where the
//   one-token tiles add a vmulps and convert each scale on its own. Those
//   five vector instructions for 32 multiply-adds (the peak's pair does 32 in
//   two) bound INT8 at about half the vpmaddubsw + vpmaddwd rate on Zen 3;
//   INT4 sums 8 columns a lane and reaches more (docs/kernels.md).
// - INT4: the two bf16 scales of a row's group pair become their float lanes
//   with one broadcast load and one vpshufb.
// - No branch inside the group loop: a row's partial last group (INT8) and a
//   lone last group (INT4) are steps of their own after it.
// - Blocking: a tile's 4 rows (8 KiB of INT8 at 2048 columns) stay in L1
//   while every token pair of the call passes over them, and the call's
//   tokens (64 KiB at 32 tokens) in L2; threads take disjoint row ranges
//   (matmul_q8.cpp), so each reads its own weights once.
//
// Every output goes through the definition's operations in its order, so
// the bits are the one-token tiles' (tests/kernels compare them bit for
// bit). Built with -mavx2 -mfma -mf16c; internal linkage but the entry.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/matmul_q8.hpp"
#include "kernels/named_regs.hpp"
#include "kernels/x86/avx2_formats.hpp"

namespace trillion::avx2 {
namespace {

// Named accumulators (named_regs.hpp): __m256 as a template argument would lose its may_alias.
using F32x8 = float __attribute__((vector_size(32)));
using Acc8 = NamedRegs<F32x8>;

// The tile's R rows of W (wr0 + i * wrs) and where their outputs go in y (yr0 + i * yrs).
struct Rows {
  int64_t wr0, wrs, yr0, yrs;
};

// ---- INT8_G32

constexpr int kBlock = 8;  // groups per scale table

// s[k][j] = bf16(ws of row i, group g0 + j) * d(token t, g0 + j), k = i * T + t, j < count.
template <int R, int T>
inline void int8_scales(const uint16_t* const* sc, const float* const* d, int64_t g0, int count,
                        float (*s)[kBlock]) {
  if (count == kBlock) {
    for (int i = 0; i < R; ++i) {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(sc[i] + g0));
      const __m256 ws = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
      for (int t = 0; t < T; ++t) _mm256_store_ps(s[i * T + t], _mm256_mul_ps(ws, _mm256_loadu_ps(d[t] + g0)));
    }
    return;
  }
  for (int i = 0; i < R; ++i)  // the last groups of a row: the same float32 products one at a time
    for (int t = 0; t < T; ++t)
      for (int j = 0; j < count; ++j) s[i * T + t][j] = bf16_value(sc[i][g0 + j]) * d[t][g0 + j];
}

// One group of R rows (weights w[i], 32 bytes each) times T tokens (x[t]),
// with the scale products at s[k][j]: the definition's step, as int8_group.
template <int R, int T>
inline void int8_step(const __m256i* w, const __m256i* x, const float (*s)[kBlock], int j, Acc8& acc) {
  const __m256i ones = _mm256_set1_epi16(1);
  unrolled<R>([&]<int i>() __attribute__((always_inline)) {
    const __m256i aw = _mm256_sign_epi8(w[i], w[i]);  // |w|; -128 stays 0x80 = 128 unsigned
    unrolled<T>([&]<int t>() __attribute__((always_inline)) {
      const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(x[t], w[i])), ones);
      F32x8& a = acc.at<i * T + t>();
      a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_broadcast_ss(&s[i * T + t][j]), a);
    });
  });
}

template <int R, int T>
void int8_tile(const QMatrix& W, const Q8Rows& xq, const Rows& rows, int64_t t0, float* y, int64_t ldy) {
  static_assert(R * T <= 8);
  const int64_t full = W.cols / kQ8Group;  // whole groups; a partial one follows when xq.groups > full
  const int8_t* w[R];
  const uint16_t* sc[R];
  for (int i = 0; i < R; ++i) {
    const int64_t r = rows.wr0 + i * rows.wrs;
    w[i] = static_cast<const int8_t*>(W.data) + r * W.cols;
    sc[i] = static_cast<const uint16_t*>(W.scale) + r * W.scale_cols;
  }
  const int8_t* xr[T];
  const float* d[T];
  for (int t = 0; t < T; ++t) xr[t] = xq.row_q(t0 + t), d[t] = xq.row_d(t0 + t);
  alignas(32) float s[R * T][kBlock];
  Acc8 acc;  // zeros
  for (int64_t g0 = 0; g0 < full; g0 += kBlock) {
    const int count = int(std::min<int64_t>(kBlock, full - g0));
    int8_scales<R, T>(sc, d, g0, count, s);
    for (int j = 0; j < count; ++j) {
      const int64_t c = (g0 + j) * kQ8Group;
      __m256i wv[R], xv[T];
      for (int i = 0; i < R; ++i) wv[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i] + c));
      for (int t = 0; t < T; ++t) xv[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xr[t] + c));
      int8_step<R, T>(wv, xv, s, j, acc);
    }
  }
  if (full < xq.groups) {  // the rows' partial last group, read through a zero-padded copy
    const int64_t c = full * kQ8Group, left = W.cols - c;
    int8_scales<R, T>(sc, d, full, 1, s);
    __m256i wv[R], xv[T];
    for (int i = 0; i < R; ++i) {
      alignas(32) int8_t buf[kQ8Group] = {};
      std::memcpy(buf, w[i] + c, size_t(left));
      wv[i] = _mm256_load_si256(reinterpret_cast<const __m256i*>(buf));
    }
    for (int t = 0; t < T; ++t) xv[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xr[t] + c));
    int8_step<R, T>(wv, xv, s, 0, acc);
  }
  unrolled<R * T>([&]<int k>() __attribute__((always_inline)) { y[(t0 + k % T) * ldy + rows.yr0 + (k / T) * rows.yrs] = hsum(acc.at<k>()); });
}

// ---- INT4_G32

// Lanes 0-3: the bf16 scale of group 2p as a float, lanes 4-7 that of 2p + 1:
// the pair's two scales (one 32-bit load, broadcast) shuffled under the top
// half of each lane, zeros below.
inline __m256 int4_pair_scales(const uint16_t* sc) {
  const __m256i ctrl = _mm256_setr_epi8(-1, -1, 0, 1, -1, -1, 0, 1, -1, -1, 0, 1, -1, -1, 0, 1,  //
                                        -1, -1, 2, 3, -1, -1, 2, 3, -1, -1, 2, 3, -1, -1, 2, 3);
  int32_t two;
  std::memcpy(&two, sc, 4);
  return _mm256_castsi256_ps(_mm256_shuffle_epi8(_mm256_set1_epi32(two), ctrl));
}

// One pair of groups (64 columns) of R rows times T tokens: the definition's
// step, as matmul_q8_tiles.hpp's int4_pair. `lone`: only group 2p exists (16
// bytes a row, never read past; lanes 4..7 kept as they are).
template <int R, int T, bool lone>
inline void int4_step(const uint8_t* const* w, const uint16_t* const* sc, const Q8Pair* const* x, int64_t p,
                      Acc8& acc) {
  const __m256i nib = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  unrolled<R>([&]<int i>() __attribute__((always_inline)) {
    __m256i b;
    __m256 ws;
    if constexpr (lone) {
      b = _mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[i] + 32 * p)));
      ws = _mm256_set1_ps(bf16_value(sc[i][2 * p]));
    } else {
      b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i] + 32 * p));
      ws = int4_pair_scales(sc[i] + 2 * p);
    }
    const __m256i lo = _mm256_and_si256(b, nib), hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), nib);
    unrolled<T>([&]<int t>() __attribute__((always_inline)) {
      const Q8Pair& q = x[t][p];
      const __m256i s16 = _mm256_add_epi16(
          _mm256_maddubs_epi16(lo, _mm256_load_si256(reinterpret_cast<const __m256i*>(q.e))),
          _mm256_maddubs_epi16(hi, _mm256_load_si256(reinterpret_cast<const __m256i*>(q.o))));
      const __m256i isum =
          _mm256_sub_epi32(_mm256_madd_epi16(s16, ones), _mm256_load_si256(reinterpret_cast<const __m256i*>(q.c)));
      F32x8& a = acc.at<i * T + t>();
      const __m256 next = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(ws, _mm256_load_ps(q.d)), a);
      a = lone ? _mm256_blend_ps(next, a, 0xF0) : next;
    });
  });
}

template <int R, int T>
void int4_tile(const QMatrix& W, const Q8Rows& xq, const Rows& rows, int64_t t0, float* y, int64_t ldy) {
  static_assert(R * T <= 8);
  const uint8_t* w[R];
  const uint16_t* sc[R];
  for (int i = 0; i < R; ++i) {
    const int64_t r = rows.wr0 + i * rows.wrs;
    w[i] = static_cast<const uint8_t*>(W.data) + r * (W.cols / 2);
    sc[i] = static_cast<const uint16_t*>(W.scale) + r * W.scale_cols;
  }
  const Q8Pair* x[T];
  for (int t = 0; t < T; ++t) x[t] = xq.row_pairs(t0 + t);
  Acc8 acc;
  const int64_t whole = xq.groups / 2;
  for (int64_t p = 0; p < whole; ++p) int4_step<R, T, false>(w, sc, x, p, acc);
  if (whole < xq.pairs) int4_step<R, T, true>(w, sc, x, whole, acc);
  unrolled<R * T>([&]<int k>() __attribute__((always_inline)) { y[(t0 + k % T) * ldy + rows.yr0 + (k / T) * rows.yrs] = hsum(acc.at<k>()); });
}

// ---- the product

// R rows times every token of the call: token pairs, then a lone last one.
template <MatFormat F, int R>
void rows_times_tokens(const QMatrix& W, const Q8Rows& xq, const Rows& rows, float* y, int64_t ldy) {
  int64_t t = 0;
  for (; t + 2 <= xq.n; t += 2) {
    if constexpr (F == MatFormat::INT8_G32) int8_tile<R, 2>(W, xq, rows, t, y, ldy);
    else int4_tile<R, 2>(W, xq, rows, t, y, ldy);
  }
  if (t < xq.n) {
    if constexpr (F == MatFormat::INT8_G32) int8_tile<R, 1>(W, xq, rows, t, y, ldy);
    else int4_tile<R, 1>(W, xq, rows, t, y, ldy);
  }
}

// Rows [r0, r1) in tiles of 4 rows a quarter of the range apart (so the first
// token pair's sweep reads 4 sequential weight streams, as the one-token
// tiles do), the last (r1 - r0) % 4 rows together.
template <MatFormat F>
void gemm_rows(const QMatrix& W, const Q8Rows& xq, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  const int64_t q = (r1 - r0) / 4;
  for (int64_t k = 0; k < q; ++k) rows_times_tokens<F, 4>(W, xq, {r0 + k, q, r0 + k, q}, y, ldy);
  const int64_t r = r0 + 4 * q;
  switch (r1 - r) {
    case 3: rows_times_tokens<F, 3>(W, xq, {r, 1, r, 1}, y, ldy); break;
    case 2: rows_times_tokens<F, 2>(W, xq, {r, 1, r, 1}, y, ldy); break;
    case 1: rows_times_tokens<F, 1>(W, xq, {r, 1, r, 1}, y, ldy); break;
    default: break;
  }
}

}  // namespace

void matmul_q8_gemm_rows(const QMatrix& W, const Q8Rows& xq, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  if (W.format == MatFormat::INT8_G32) gemm_rows<MatFormat::INT8_G32>(W, xq, y, ldy, r0, r1);
  else gemm_rows<MatFormat::INT4_G32>(W, xq, y, ldy, r0, r1);
}

}  // namespace trillion::avx2
