// The integer-dot product with AVX-512 (F, BW, DQ, VL and VNNI: AMD Zen 4/5,
// Intel Ice Lake and later servers) for two tokens and more: one zmm holds
// the definition's 8 lanes of two tokens side by side (token t0 in the low
// half, t0 + 1 in the high half), so every instruction of the product -
// the exact integer lane sums, the conversion, the scale multiply and the
// fma - serves two outputs. Each half performs exactly the operations of
// matmul_q8.hpp's definition on its own token, so the bits are the AVX2
// tiles'. One token (decode at batch 1, and a lone last token) has a zmm
// tile of its own per format: int8_one_token512, int4_one_token512.
//
// INT8_G32 without vpsignb (AVX-512 has none): the weights go in as the
// unsigned operand w + 128 (w xor 0x80), so vpdpbusd gives
// isum_k + 128 sum_{j<4} q[4k+j]; that correction is the token's, one
// vpdpbusd of bytes of 128 with the activations per group and tile, shared
// by every row, and its negation is the accumulator each row's vpdpbusd
// starts from: one instruction per row, group and token pair for the lane
// sums (the correction by the weights' sum, per row, took two, and ran
// slower at n = 32). The float steps, one
// per 4 columns as the definition asks, are the rest of the work. Exact
// int32 throughout: |sum| <= 4 * 255 * 127 before the correction.
// INT4_G32: the stored nibbles (w + 8) are the unsigned operand, as in the
// AVX2 tile, less pc = 8 sum q per lane.
//
// Built with AVX-512 flags (src/kernels/CMakeLists.txt lists the files);
// runs only after the CPUID check (cpu_has_avx512_vnni).
#include "kernels/x86/avx512_intrinsics.hpp"  // first: <immintrin.h>, GCC 12's warnings from it silenced

#include <cstring>

#include "kernels/x86/matmul_q8_tiles.hpp"

namespace trillion::avx2 {
namespace {

struct VnniDot {  // for the one-token tiles (VEX and EVEX encodings compute the same)
  static __m256i int8_lanes(__m256i a, __m256i b) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), a, b); }
  static __m256i int4_lanes(__m256i lo, __m256i xe, __m256i hi, __m256i xo, __m256i pc) {
    return _mm256_sub_epi32(_mm256_dpbusd_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), lo, xe), hi, xo), pc);
  }
};

// Two 256-bit rows of memory as the halves of one zmm.
inline __m512i halves(const void* lo, const void* hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(static_cast<const __m256i*>(lo))),
                            _mm256_loadu_si256(static_cast<const __m256i*>(hi)), 1);
}
inline __m512 halves_ps(const float* lo, const float* hi) {
  return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(lo)), _mm256_loadu_ps(hi), 1);
}
// The definition's final tree of each half (hsum: avx2_formats.hpp).
inline void store_halves(__m512 acc, float* y_lo, float* y_hi) {
  *y_lo = hsum(_mm512_castps512_ps256(acc));
  *y_hi = hsum(_mm512_extractf32x8_ps(acc, 1));
}

// INT8_G32: rows wr0 + i wrs (i < R) times tokens t0 .. t0 + 2P - 1 (P zmm token pairs).
template <int R, int P>
void int8_tile(const QMatrix& W, const Q8Rows& xq, int64_t wr0, int64_t wrs, int64_t t0, float* y, int64_t ldy,
               int64_t yr0, int64_t yrs) {
  const uint16_t* wscale = static_cast<const uint16_t*>(W.scale);
  const __m512i flip = _mm512_set1_epi8(int8_t(0x80));
  __m512 acc[R][P];
  for (int i = 0; i < R; ++i)
    for (int p = 0; p < P; ++p) acc[i][p] = _mm512_setzero_ps();
  for (int64_t g = 0; g < xq.groups; ++g) {
    __m512i x[P];       // q of tokens (2p, 2p + 1), signed bytes
    __m512i negpc[P];   // -128 sum_{j<4} q[4k+j] per lane: where each row's lane sums start
    __m512 d[P];        // their d_g, 8 lanes each
    for (int p = 0; p < P; ++p) {
      const int64_t t = t0 + 2 * p;
      x[p] = halves(xq.row_q(t) + g * kQ8Group, xq.row_q(t + 1) + g * kQ8Group);
      negpc[p] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), flip, x[p]));
      d[p] = _mm512_insertf32x8(_mm512_set1_ps(xq.row_d(t)[g]), _mm256_set1_ps(xq.row_d(t + 1)[g]), 1);
    }
    for (int i = 0; i < R; ++i) {
      const __m512i u = _mm512_xor_si512(_mm512_broadcast_i64x4(load_group(W, wr0 + i * wrs, g)), flip);  // w + 128
      const __m512 ws = _mm512_set1_ps(bf16_value(wscale[(wr0 + i * wrs) * W.scale_cols + g]));
      for (int p = 0; p < P; ++p) {
        const __m512i isum = _mm512_dpbusd_epi32(negpc[p], u, x[p]);
        acc[i][p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(ws, d[p]), acc[i][p]);
      }
    }
  }
  for (int i = 0; i < R; ++i)
    for (int p = 0; p < P; ++p)
      store_halves(acc[i][p], &y[(t0 + 2 * p) * ldy + yr0 + i * yrs], &y[(t0 + 2 * p + 1) * ldy + yr0 + i * yrs]);
}

// INT4_G32: rows wr0 + i wrs (i < R) times tokens t0 .. t0 + 2P - 1. Pair p's
// 32 bytes of a row are broadcast to both halves; `lone` as in int4_pair.
template <int R, int P>
void int4_tile512(const QMatrix& W, const Q8Rows& xq, int64_t wr0, int64_t wrs, int64_t t0, float* y, int64_t ldy,
                  int64_t yr0, int64_t yrs) {
  const int64_t row_bytes = W.cols / 2;
  const uint8_t* w = static_cast<const uint8_t*>(W.data) + wr0 * row_bytes;
  const uint16_t* sc = static_cast<const uint16_t*>(W.scale) + wr0 * W.scale_cols;
  const __m512i nib = _mm512_set1_epi8(0x0F);
  const __m512i shift = _mm512_setr_epi32(16, 16, 16, 16, 0, 0, 0, 0, 16, 16, 16, 16, 0, 0, 0, 0);
  const __m512i top = _mm512_set1_epi32(int32_t(0xFFFF0000u));
  __m512 acc[R][P];
  for (int i = 0; i < R; ++i)
    for (int p = 0; p < P; ++p) acc[i][p] = _mm512_setzero_ps();
  auto pair = [&]<bool lone>(int64_t q) {
    __m512i xe[P], xo[P], pc[P];
    __m512 d[P];
    for (int p = 0; p < P; ++p) {
      const Q8Pair* a = xq.row_pairs(t0 + 2 * p) + q;
      const Q8Pair* b = xq.row_pairs(t0 + 2 * p + 1) + q;
      xe[p] = halves(a->e, b->e);
      xo[p] = halves(a->o, b->o);
      pc[p] = halves(a->c, b->c);
      d[p] = halves_ps(a->d, b->d);
    }
    for (int i = 0; i < R; ++i) {
      const uint8_t* wp = w + i * wrs * row_bytes + 32 * q;
      const uint16_t* sp = sc + i * wrs * W.scale_cols + 2 * q;
      __m512i bytes;
      __m512 ws;
      if constexpr (lone) {
        bytes = _mm512_broadcast_i64x4(_mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wp))));
        ws = _mm512_set1_ps(bf16_value(sp[0]));
      } else {
        bytes = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wp)));
        uint32_t two;  // scales of groups 2q, 2q + 1: lanes 0-3 the low half shifted up, 4-7 the high one
        std::memcpy(&two, sp, 4);
        ws = _mm512_castsi512_ps(_mm512_and_si512(_mm512_sllv_epi32(_mm512_set1_epi32(int32_t(two)), shift), top));
      }
      const __m512i lo = _mm512_and_si512(bytes, nib), hi = _mm512_and_si512(_mm512_srli_epi16(bytes, 4), nib);
      for (int p = 0; p < P; ++p) {
        const __m512i isum =
            _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, xe[p]), hi, xo[p]), pc[p]);
        const __m512 next = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(ws, d[p]), acc[i][p]);
        acc[i][p] = lone ? _mm512_mask_blend_ps(__mmask16(0xF0F0), next, acc[i][p]) : next;
      }
    }
  };
  const int64_t whole = xq.groups / 2;
  for (int64_t q = 0; q < whole; ++q) pair.template operator()<false>(q);
  if (whole < xq.pairs) pair.template operator()<true>(whole);
  for (int i = 0; i < R; ++i)
    for (int p = 0; p < P; ++p)
      store_halves(acc[i][p], &y[(t0 + 2 * p) * ldy + yr0 + i * yrs], &y[(t0 + 2 * p + 1) * ldy + yr0 + i * yrs]);
}

// INT4_G32, one token (decode at batch 1, and the last of an odd n): rows
// wr0 + i wrs (i < R). A 64-byte load is two pairs of one row (p, p + 1), so
// the nibble unpack, the lane sums, the conversion and the scale multiply
// run once for both, on zmm; the two fmas stay per pair, on the row's
// 8-lane accumulator (the low half, then the high one), in the definition's
// order: the bits of int4_tile. About 15 instructions per 64 bytes and row
// (14 since the -pc start below) against 28 for two ymm pairs: one
// thread's n = 1 product was bound by issue, not by memory (it streamed from
// DRAM below what one thread reads), and fewer instructions per byte keep
// more loads in flight. The
// lane sums start from -pc, negated once per pair for all R rows, instead of
// subtracting pc per row: the same exact int32 sums, one instruction fewer
// per row.
// Pf: prefetch a line at least 2 KiB ahead (prefetch_int4_ahead), as the
// AVX2 tile does (Pf only at n = 1: later tokens find the rows in cache).
template <int R, bool Pf>
void int4_one_token512(const QMatrix& W, const Q8Rows& xq, int64_t wr0, int64_t wrs, int64_t t0, float* y,
                       int64_t ldy, int64_t yr0, int64_t yrs) {
  const int64_t row_bytes = W.cols / 2, wstep = wrs * row_bytes, sstep = wrs * W.scale_cols;
  const uint8_t* w = static_cast<const uint8_t*>(W.data) + wr0 * row_bytes;
  const uint16_t* sc = static_cast<const uint16_t*>(W.scale) + wr0 * W.scale_cols;
  const Q8Pair* x = xq.row_pairs(t0);
  const __m512i nib = _mm512_set1_epi8(0x0F);
  // vpshufb of the four scales (groups 2p .. 2p + 3, broadcast to every
  // 128-bit lane): lane j's dwords take scale j as their high half, zeros
  // below, i.e. the float of the bf16; lanes 0-3 of the zmm are group 2p's.
  const __m512i spread = _mm512_setr_epi32(0x01008080, 0x01008080, 0x01008080, 0x01008080, 0x03028080, 0x03028080,
                                           0x03028080, 0x03028080, 0x05048080, 0x05048080, 0x05048080, 0x05048080,
                                           0x07068080, 0x07068080, 0x07068080, 0x07068080);
  __m256 acc[R];
  for (int i = 0; i < R; ++i) acc[i] = _mm256_setzero_ps();
  const int64_t whole = xq.groups / 2;
  int64_t p = 0;
  for (; p + 2 <= whole; p += 2) {
    if constexpr (Pf) {
      for (int i = 0; i < R; ++i) prefetch_int4_ahead(reinterpret_cast<uintptr_t>(w + i * wstep + 32 * p), row_bytes);
      if (p % 16 == 0)  // 16 pairs' scales to a line
        for (int i = 0; i < R; ++i)
          prefetch_int4_ahead(reinterpret_cast<uintptr_t>(sc + i * sstep + 2 * p), 2 * W.scale_cols);
    }
    const __m512i xe = halves(x[p].e, x[p + 1].e), xo = halves(x[p].o, x[p + 1].o);
    const __m512i negpc = _mm512_sub_epi32(_mm512_setzero_si512(), halves(x[p].c, x[p + 1].c));
    const __m512 d = halves_ps(x[p].d, x[p + 1].d);
    for (int i = 0; i < R; ++i) {
      const __m512i bytes = _mm512_loadu_si512(w + i * wstep + 32 * p);
      const __m512i lo = _mm512_and_si512(bytes, nib), hi = _mm512_and_si512(_mm512_srli_epi16(bytes, 4), nib);
      uint64_t four;
      std::memcpy(&four, sc + i * sstep + 2 * p, 8);
      const __m512 ws = _mm512_castsi512_ps(_mm512_shuffle_epi8(_mm512_set1_epi64(int64_t(four)), spread));
      const __m512i isum = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(negpc, lo, xe), hi, xo);
      const __m512 f = _mm512_cvtepi32_ps(isum), m = _mm512_mul_ps(ws, d);
      acc[i] = _mm256_fmadd_ps(_mm512_castps512_ps256(f), _mm512_castps512_ps256(m), acc[i]);
      acc[i] = _mm256_fmadd_ps(_mm512_extractf32x8_ps(f, 1), _mm512_extractf32x8_ps(m, 1), acc[i]);
    }
  }
  if (p < whole) {  // an odd count of whole pairs: the last one as the AVX2 tile does it
    for (int i = 0; i < R; ++i)
      int4_pair<VnniDot, 1, false>(w + i * wstep + 32 * p, sc + i * sstep + 2 * p, x + p, x + p, acc[i], acc[i]);
    ++p;
  }
  if (p < xq.pairs)  // a lone last group
    for (int i = 0; i < R; ++i)
      int4_pair<VnniDot, 1, true>(w + i * wstep + 32 * p, sc + i * sstep + 2 * p, x + p, x + p, acc[i], acc[i]);
  for (int i = 0; i < R; ++i) y[t0 * ldy + yr0 + i * yrs] = hsum(acc[i]);
}

// INT8_G32, one token (decode at batch 1): rows wr0 + i wrs (i < R). A
// 64-byte load is two whole groups of one row (g, g + 1). The stored weights
// go in as the unsigned operand w + 128 (w xor 0x80) and the activations as
// they are, so vpdpbusd gives isum_k + 128 sum_{j<4} q[4k+j]; that
// correction is the token's, shared by every row: one vpdpbusd of bytes of
// 128 with the activations per pair of groups and tile, its negation the
// accumulator the row's vpdpbusd starts from (exact int32 throughout:
// |isum| <= 4 * 255 * 127 before the correction). The lane sums, the
// conversion and the scale multiply then run once for both groups, on zmm;
// the two fmas stay per group, on the row's 8-lane accumulator (the low half,
// then the high one), in the definition's order: the bits of `tile`. About
// 12 instructions per 64 bytes and row against ~20 for two ymm groups (two
// vpsignb, a scalar scale each): one thread's n = 1 product was bound by
// issue (this tile doubled it in L2 and sped up the bench model's INT8
// batch-1 decode). A last odd group or partial group runs as `tile` runs it.
template <int R, bool Pf>
void int8_one_token512(const QMatrix& W, const Q8Rows& xq, int64_t wr0, int64_t wrs, int64_t t0, float* y,
                       int64_t ldy, int64_t yr0, int64_t yrs) {
  const int64_t row_bytes = W.cols, wstep = wrs * row_bytes, sstep = wrs * W.scale_cols;
  const int8_t* w = static_cast<const int8_t*>(W.data) + wr0 * row_bytes;
  const uint16_t* sc = static_cast<const uint16_t*>(W.scale) + wr0 * W.scale_cols;
  const int8_t* xr = xq.row_q(t0);
  const float* xd = xq.row_d(t0);
  const __m512i flip = _mm512_set1_epi8(int8_t(0x80));
  const __m512i shift = _mm512_setr_epi32(16, 16, 16, 16, 16, 16, 16, 16, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512i top = _mm512_set1_epi32(int32_t(0xFFFF0000u));
  __m256 acc[R];
  for (int i = 0; i < R; ++i) acc[i] = _mm256_setzero_ps();
  const int64_t whole = (W.cols / kQ8Group) / 2;  // pairs of whole groups
  for (int64_t p = 0; p < whole; ++p) {
    const int64_t g = 2 * p;
    if constexpr (Pf) {
      for (int i = 0; i < R; ++i)  // one 64-byte line: this pair
        prefetch_next_row(reinterpret_cast<uintptr_t>(w + i * wstep + g * kQ8Group), row_bytes);
      if (g % 32 == 0)  // the next row's scales: 32 groups to a line
        for (int i = 0; i < R; ++i) prefetch_next_row(reinterpret_cast<uintptr_t>(sc + i * sstep + g), 2 * W.scale_cols);
    }
    const __m512i x = _mm512_loadu_si512(xr + g * kQ8Group);
    const __m512i negpc = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), flip, x));
    const __m512 d = _mm512_insertf32x8(_mm512_set1_ps(xd[g]), _mm256_set1_ps(xd[g + 1]), 1);
    for (int i = 0; i < R; ++i) {
      const __m512i u = _mm512_xor_si512(_mm512_loadu_si512(w + i * wstep + g * kQ8Group), flip);
      uint32_t two;  // scales of groups g, g + 1: lanes 0-7 the low half shifted up, 8-15 the high one
      std::memcpy(&two, sc + i * sstep + g, 4);
      const __m512 ws = _mm512_castsi512_ps(_mm512_and_si512(_mm512_sllv_epi32(_mm512_set1_epi32(int32_t(two)), shift), top));
      const __m512i isum = _mm512_dpbusd_epi32(negpc, u, x);
      const __m512 f = _mm512_cvtepi32_ps(isum), m = _mm512_mul_ps(ws, d);
      acc[i] = _mm256_fmadd_ps(_mm512_castps512_ps256(f), _mm512_castps512_ps256(m), acc[i]);
      acc[i] = _mm256_fmadd_ps(_mm512_extractf32x8_ps(f, 1), _mm512_extractf32x8_ps(m, 1), acc[i]);
    }
  }
  for (int64_t g = 2 * whole; g < xq.groups; ++g) {  // an odd last whole group, a partial one: `tile`'s step
    const __m256i xs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xr + g * kQ8Group));
    const __m256 dg = _mm256_set1_ps(xd[g]);
    for (int i = 0; i < R; ++i) {
      const __m256i wg = load_group(W, wr0 + i * wrs, g);
      int8_group<VnniDot>(_mm256_sign_epi8(wg, wg), wg, _mm256_set1_ps(bf16_value(sc[i * sstep + g])), xs, dg, acc[i]);
    }
  }
  for (int i = 0; i < R; ++i) y[t0 * ldy + yr0 + i * yrs] = hsum(acc[i]);
}

template <MatFormat F, int R>
void rows_all_tokens512(const QMatrix& W, const Q8Rows& xq, int64_t wr0, int64_t wrs, float* y, int64_t ldy,
                        int64_t yr0, int64_t yrs) {
  int64_t t = 0;
  if constexpr (F == MatFormat::INT8_G32) {
    for (; t + 4 <= xq.n; t += 4) int8_tile<R, 2>(W, xq, wr0, wrs, t, y, ldy, yr0, yrs);
    if (t + 2 <= xq.n) int8_tile<R, 1>(W, xq, wr0, wrs, t, y, ldy, yr0, yrs), t += 2;
    if (t < xq.n) int8_one_token512<R, false>(W, xq, wr0, wrs, t, y, ldy, yr0, yrs);
  } else {
    for (; t + 4 <= xq.n; t += 4) int4_tile512<R, 2>(W, xq, wr0, wrs, t, y, ldy, yr0, yrs);
    if (t + 2 <= xq.n) int4_tile512<R, 1>(W, xq, wr0, wrs, t, y, ldy, yr0, yrs), t += 2;
    if (t < xq.n) int4_one_token512<R, false>(W, xq, wr0, wrs, t, y, ldy, yr0, yrs);
  }
}

// Rows [r0, r1) in tiles of 4 rows a quarter of the range apart, as matmul_rows_q8.
template <MatFormat F>
void rows512(const QMatrix& W, const Q8Rows& xq, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  const int64_t q = (r1 - r0) / 4;
  for (int64_t k = 0; k < q; ++k) rows_all_tokens512<F, 4>(W, xq, r0 + k, q, y, ldy, r0 + k, q);
  for (int64_t r = r0 + 4 * q; r < r1; ++r) rows_all_tokens512<F, 1>(W, xq, r, 1, y, ldy, r, 1);
}

// One token: rows [r0, r1) in tiles of 4 rows a quarter of the range apart, as rows512.
template <MatFormat F>
void rows_one_token512(const QMatrix& W, const Q8Rows& xq, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  const int64_t q = (r1 - r0) / 4;
  if constexpr (F == MatFormat::INT8_G32) {
    for (int64_t k = 0; k < q; ++k) int8_one_token512<4, true>(W, xq, r0 + k, q, 0, y, ldy, r0 + k, q);
    for (int64_t r = r0 + 4 * q; r < r1; ++r) int8_one_token512<1, true>(W, xq, r, 1, 0, y, ldy, r, 1);
  } else {
    for (int64_t k = 0; k < q; ++k) int4_one_token512<4, true>(W, xq, r0 + k, q, 0, y, ldy, r0 + k, q);
    for (int64_t r = r0 + 4 * q; r < r1; ++r) int4_one_token512<1, true>(W, xq, r, 1, 0, y, ldy, r, 1);
  }
}

}  // namespace

// Rows [r0, r0 + 16 * panels) times every token (matmul_q8_panels_avx512.cpp).
void matmul_q8_panels_avx512(const QMatrix& W, const Q8Rows& xq, float* y, int64_t ldy, int64_t r0, int64_t panels);

void matmul_q8_rows_avx512(const QMatrix& W, const Q8Rows& xq, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  if (xq.n == 1 && W.format == MatFormat::INT8_G32) return rows_one_token512<MatFormat::INT8_G32>(W, xq, y, ldy, r0, r1);
  if (xq.n == 1) return rows_one_token512<MatFormat::INT4_G32>(W, xq, y, ldy, r0, r1);
  // From these batch sizes the 16-row panels (matmul_q8_panels_avx512.cpp)
  // beat the tiles below, whose per-output work is larger but which need no
  // transpose of the weights (one thread, 2048 x 4096, alternated runs:
  // INT8 +7% at n = 5, +18% at 6, -12% at 4; INT4 even at 8, +15% at 10).
  const int64_t panels_from = W.format == MatFormat::INT8_G32 ? 5 : 9;
  if (xq.n >= panels_from) {
    if (const int64_t panels = (r1 - r0) / 16; panels > 0) {
      matmul_q8_panels_avx512(W, xq, y, ldy, r0, panels);
      r0 += 16 * panels;
      if (r0 == r1) return;
    }
  }
  if (W.format == MatFormat::INT8_G32) rows512<MatFormat::INT8_G32>(W, xq, y, ldy, r0, r1);
  else rows512<MatFormat::INT4_G32>(W, xq, y, ldy, r0, r1);
}

}  // namespace trillion::avx2
