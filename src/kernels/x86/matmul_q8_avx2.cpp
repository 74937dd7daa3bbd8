// AVX2 integer-dot kernels (matmul_q8.hpp defines the arithmetic to the bit).
//
// A 32-column group of one weight row is one ymm of int8 (INT8_G32 loaded,
// INT4_G32 nibbles unpacked in registers). INT4 multiplies the nibbles as
// stored (w + 8, unsigned) by q with vpmaddubsw and subtracts 8 q per lane
// (computed once per token and group): the same exact sums. INT8, with the
// activations' group q: vpsignb moves q's sign onto the weights, vpmaddubsw
// multiplies |q| (unsigned) by them and adds pairs (|sum| <= 2*127*127, no
// saturation), vpmaddwd by ones adds pairs again: lane k holds the exact sum
// over columns 4k..4k+3, as the definition asks. One fma per lane adds it
// times (weight scale * activation scale). Register tiles of R rows x T
// tokens share each loaded group; every tile performs the same operations
// per output, so tiles, n and threads never change a bit.
#include <immintrin.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/matmul_q8.hpp"
#include "kernels/x86/avx2_formats.hpp"
#include "kernels/q8_scalar.hpp"

namespace trillion::avx2 {
namespace {

// Group g of row r as 32 int8 weights; for INT4 with `raw`, the nibbles
// as stored (0..15, the weight + 8).
template <MatFormat F, bool raw = false>
inline __m256i load_group(const QMatrix& W, int64_t r, int64_t g) {
  if constexpr (F == MatFormat::INT8_G32) {
    const int8_t* p = static_cast<const int8_t*>(W.data) + r * W.cols + g * kQ8Group;
    const int64_t left = W.cols - g * kQ8Group;
    if (left >= kQ8Group) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    alignas(32) int8_t buf[kQ8Group] = {};  // the row's partial last group; never read past its end
    std::memcpy(buf, p, size_t(left));
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(buf));
  } else {
    const uint8_t* p = static_cast<const uint8_t*>(W.data) + (r * W.cols + g * kQ8Group) / 2;
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i m = _mm_set1_epi8(0x0F);
    const __m128i lo = _mm_and_si128(b, m), hi = _mm_and_si128(_mm_srli_epi16(b, 4), m);
    // Byte i holds columns 2i (low nibble) and 2i + 1: interleave back to column order.
    const __m256i w = _mm256_set_m128i(_mm_unpackhi_epi8(lo, hi), _mm_unpacklo_epi8(lo, hi));
    return raw ? w : _mm256_sub_epi8(w, _mm256_set1_epi8(8));
  }
}

// Rows wr0 + i wrs (i < R) of W times tokens [t0, t0 + T), into y rows
// yr0 + i yrs. Strided rows (wrs = a quarter of the range) make the tile's
// sweep read R sequential streams, which the prefetchers follow (see
// matmul_avx2.cpp's rows_direct_tiles for the measurements).
template <MatFormat F, int R, int T>
void tile(const QMatrix& W, const Q8Rows& xq, int64_t wr0, int64_t wrs, int64_t t0, float* y, int64_t ldy,
          int64_t yr0, int64_t yrs) {
  const uint16_t* wscale = static_cast<const uint16_t*>(W.scale);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[R][T];
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < T; ++t) acc[i][t] = _mm256_setzero_ps();
  constexpr bool int4 = F == MatFormat::INT4_G32;
  for (int64_t g = 0; g < xq.groups; ++g) {
    // INT8: |x| times the weights with x's sign (vpsignb), as vpmaddubsw
    // wants one unsigned operand. INT4: the stored nibbles (w + 8, unsigned)
    // times x directly, less 8 x per lane (exact: the same int32 sums, two
    // instructions fewer per group and row).
    __m256i xs[T], ax[T];
    __m256 d[T];
    for (int t = 0; t < T; ++t) {
      xs[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq.row_q(t0 + t) + g * kQ8Group));
      ax[t] = int4 ? _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(8), xs[t]), ones)  // 8 x per lane
                   : _mm256_sign_epi8(xs[t], xs[t]);
      d[t] = _mm256_set1_ps(xq.row_d(t0 + t)[g]);
    }
    for (int i = 0; i < R; ++i) {
      const __m256i w = load_group<F, int4>(W, wr0 + i * wrs, g);
      const __m256 ws = _mm256_set1_ps(bf16_value(wscale[(wr0 + i * wrs) * W.scale_cols + g]));
      for (int t = 0; t < T; ++t) {
        const __m256i p = int4 ? _mm256_sub_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(w, xs[t]), ones), ax[t])
                               : _mm256_madd_epi16(_mm256_maddubs_epi16(ax[t], _mm256_sign_epi8(w, xs[t])), ones);
        acc[i][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(ws, d[t]), acc[i][t]);
      }
    }
  }
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < T; ++t) y[(t0 + t) * ldy + yr0 + i * yrs] = hsum(acc[i][t]);  // avx2_formats.hpp: the definition's tree
}

template <MatFormat F, int R>
void rows_all_tokens(const QMatrix& W, const Q8Rows& xq, int64_t wr0, int64_t wrs, float* y, int64_t ldy, int64_t yr0,
                     int64_t yrs) {
  int64_t t = 0;
  for (; t + 2 <= xq.n; t += 2) tile<F, R, 2>(W, xq, wr0, wrs, t, y, ldy, yr0, yrs);
  if (t < xq.n) tile<F, R, 1>(W, xq, wr0, wrs, t, y, ldy, yr0, yrs);
}

// From this many tokens on, an INT4 row tile is unpacked to int8 once (into
// an L1/L2-resident buffer) and its tokens run on the INT8 tiles: the nibble
// unpack then costs once per row instead of once per token pair. The int8
// values are the same, so are the bits.
constexpr int64_t kUnpackTokens = 4;

// Tile k of the range: rows r0 + k + i q (q = (r1 - r0) / 4), unpacked into
// `buf` as 4 INT8_G32 rows whose scales keep their stride (q rows apart).
void int4_tile_unpacked(const QMatrix& W, const Q8Rows& xq, float* y, int64_t ldy, int64_t r, int64_t q) {
  thread_local std::vector<int8_t> buf;
  buf.resize(size_t(4 * W.cols));
  for (int i = 0; i < 4; ++i)
    for (int64_t g = 0; g < xq.groups; ++g)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(&buf[size_t(i * W.cols + g * kQ8Group)]),
                          load_group<MatFormat::INT4_G32>(W, r + i * q, g));
  QMatrix tile = W;
  tile.format = MatFormat::INT8_G32;
  tile.rows = 4;
  tile.data = buf.data();
  tile.scale = static_cast<const uint16_t*>(W.scale) + r * W.scale_cols;
  tile.scale_cols = q * W.scale_cols;  // row i's scales, q rows on
  rows_all_tokens<MatFormat::INT8_G32, 4>(tile, xq, 0, 1, y, ldy, r, q);
}

// Rows [r0, r1) in tiles of 4 rows a quarter of the range apart, the last
// (r1 - r0) % 4 rows one at a time. Which tile a row is in never changes its
// operations, so neither its bits.
template <MatFormat F>
void matmul_rows_q8(const QMatrix& W, const Q8Rows& xq, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  const int64_t q = (r1 - r0) / 4;
  const bool unpack = F == MatFormat::INT4_G32 && xq.n >= kUnpackTokens;
  for (int64_t k = 0; k < q; ++k) {
    if (unpack) int4_tile_unpacked(W, xq, y, ldy, r0 + k, q);
    else rows_all_tokens<F, 4>(W, xq, r0 + k, q, y, ldy, r0 + k, q);
  }
  for (int64_t r = r0 + 4 * q; r < r1; ++r) rows_all_tokens<F, 1>(W, xq, r, 1, y, ldy, r, 1);
}

}  // namespace

void quantize_q8_row(const float* x, int64_t cols, int8_t* q, float* d) {
  const __m256 sign = _mm256_set1_ps(-0.0f), big = _mm256_set1_ps(FLT_MAX);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const int64_t full = cols / kQ8Group;
  for (int64_t g = 0; g < full; ++g) {
    const float* xg = x + g * kQ8Group;
    __m256 v[4], amax = _mm256_setzero_ps();
    int finite = 0xFF;
    for (int k = 0; k < 4; ++k) {
      v[k] = _mm256_loadu_ps(xg + 8 * k);
      const __m256 a = _mm256_andnot_ps(sign, v[k]);
      finite &= _mm256_movemask_ps(_mm256_cmp_ps(a, big, _CMP_LE_OQ));  // false for NaN and inf
      amax = _mm256_max_ps(amax, a);
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    const float dg = finite == 0xFF ? _mm_cvtss_f32(m) / 127.0f : NAN;
    d[g] = dg;
    __m256i out = _mm256_setzero_si256();
    if (finite == 0xFF && dg > 0.0f) {
      const __m256 dv = _mm256_set1_ps(dg);
      __m256i i[4];
      for (int k = 0; k < 4; ++k)  // x / d exactly rounded, then to nearest, ties to even
        i[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_div_ps(v[k], dv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]), _mm256_packs_epi32(i[2], i[3]));
      out = _mm256_permutevar8x32_epi32(p, order);  // undo the packs' 128-bit lane interleave
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + g * kQ8Group), out);
  }
  if (full * kQ8Group < cols)  // the partial last group: the same operations, one column at a time
    d[full] = quantize_q8_group_scalar(x, full * kQ8Group, cols, q + full * kQ8Group);
}

void matmul_q8_rows(const QMatrix& W, const Q8Rows& xq, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  if (W.format == MatFormat::INT8_G32) matmul_rows_q8<MatFormat::INT8_G32>(W, xq, y, ldy, r0, r1);
  else matmul_rows_q8<MatFormat::INT4_G32>(W, xq, y, ldy, r0, r1);
}

}  // namespace trillion::avx2
