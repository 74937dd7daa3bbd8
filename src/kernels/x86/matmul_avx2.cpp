// AVX2 matmul: y[t][r] = sum_c W[r][c] x[t][c].
//
// Per output element, whatever path or tile it falls in: one 8-lane FMA
// accumulator per scale group (128 FP8, 32 INT8, the whole row otherwise)
// over the group's columns in steps of 8; fused into the 8-lane total times
// the group scale; hsum's fixed tree; then the columns past the last multiple
// of 8 (summed in order, times their scale) added last. INT4 decodes straight
// to weights (q * bf16 scale, exact in float: Int4Weights) and so reduces like
// an unscaled row: one accumulator over the whole row (a 4 x 3 tile needs 12
// registers, not 24, and its blocked path is a plain float GEMM). INT8 keeps
// its group accumulators: the extra multiply of the same scheme cost ~15% at
// n = 1, where INT8 is the decode format that must stream at bandwidth.
// Both paths below perform exactly these operations on exactly these values
// (weights decode exactly to float), so they give the same bits:
//
// - direct: register tiles of 4 rows x up to 3 tokens (n <= 3) or 3 rows x
//   up to 4 tokens (n >= 4), the rows of a tile a quarter of the range apart
//   (4 sequential streams: rows_direct_tiles), weights decoded straight into
//   registers (once per tile), the next row tile prefetched in tiles of up to
//   3 tokens;
// - blocked (FP8, INT4; n >= 12): a GEMM blocking of the same
//   operations, weights decoded once per block of up to 64 tokens into an
//   L1 buffer of floats and x repacked, 3 rows x 4 tokens per register tile
//   with both operands from L1. It pays where the decode is costly (FP8's
//   conversions, INT4's shifts) and n amortizes the buffer.
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/kernel_table.hpp"
#include "kernels/x86/avx2_formats.hpp"

namespace trillion {
namespace avx2 {
namespace {

constexpr int kMaxRows = 4, kMaxToks = 4;
// Tiles of up to this many tokens prefetch the next row tile (below): 1..3
// token tiles still wait on memory (measured +5-10% at n = 2, 3 for BF16, FP8,
// INT8); the 4-token tiles are compute bound, and BF16 lost with the blocks there.
constexpr int kPrefetchToks = 3;

// INT4 as weights, (nibble - 8) * scale = fma(nibble, scale, -8 * scale):
// exact (at most 4 + 8 significant bits), and one operation fewer than
// converting q, then scaling. Decoded per 8 columns, or per 32-column scale
// group with the scale broadcast once (group_scale, load_scaled). kGroup = 0:
// no group accumulators; scale_at = 1, so "times the scale" is exact.
struct Int4Weights {
  static constexpr int64_t kGroup = 0;
  static constexpr int64_t kScaleGroup = Int4Format::kGroup;
  static constexpr int kBits = Int4Format::kBits;
  struct Scale {
    __m256 s, off;  // scale, -8 * scale
  };
  Int4Format f;
  const void* ptr(int64_t r, int64_t c) const { return f.ptr(r, c); }
  Scale group_scale(int64_t r, int64_t c) const {
    const __m256 s = f.scale_vec(r, c);
    return {s, _mm256_mul_ps(s, _mm256_set1_ps(-8.0f))};
  }
  __m256 load_scaled(int64_t r, int64_t c, const Scale& s) const {
    return _mm256_fmadd_ps(f.load_nibbles(r, c), s.s, s.off);
  }
  __m256 load(int64_t r, int64_t c) const { return load_scaled(r, c, group_scale(r, c)); }
  float at(int64_t r, int64_t c) const { return f.at(r, c) * f.scale_at(r, c); }
  float scale_at(int64_t, int64_t) const { return 1.0f; }
};

// FP8 for the rows path at n <= 3 (decode), without F16C: each byte moved to
// the top of its 32-bit lane (an in-lane byte shuffle of a 16-byte
// broadcast), shifted right arithmetically by 4 and masked to
// sign | 0000 eeee mmm: the float whose bits those are is the e4m3 value
// times 2^-120, exact (e4m3 subnormals become float subnormals). x is
// pre-scaled by 2^64 (kXScale; exact) so that products stay normal, and the
// block scale carries 2^56: e4m3 x s = (e4m3 2^-120) (x 2^64) (s 2^56).
// Every product, sum and scaling is Fp8Format's times a power of two, so the
// bits equal Fp8Format's (used at n >= 4) unless a product e4m3 x is below
// 2^-70 (~1e-21; it then rounds as a float subnormal, which can move the last
// bit only of a dot product that small as a whole) or |x| >= 2^64.
// Measured (bench_matmul, 1 thread, best of 5 alternating runs): n = 1
// 11.4 -> 15.4 Gw/s from L2, 11.6 -> 14.0 from memory (8192 x 8192).
struct Fp8Shifted {
  static constexpr int64_t kGroup = 128;
  static constexpr int kBits = 8;
  static constexpr float kXScale = 0x1p64f;
  Fp8Format f;
  static __m256 bits_to_value(__m256i top_bytes) {
    return _mm256_castsi256_ps(
        _mm256_and_si256(_mm256_srai_epi32(top_bytes, 4), _mm256_set1_epi32(int32_t(0x87FFFFFFu))));
  }
  const void* ptr(int64_t r, int64_t c) const { return f.ptr(r, c); }
  __m256 load(int64_t r, int64_t c) const {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(f.d + r * f.cols + c));
    return bits_to_value(_mm256_slli_epi32(_mm256_cvtepu8_epi32(b), 24));
  }
  void load16(int64_t r, int64_t c, __m256& lo, __m256& hi) const {
    const __m256i to_lo = _mm256_setr_epi8(-1, -1, -1, 0, -1, -1, -1, 1, -1, -1, -1, 2, -1, -1, -1, 3,  //
                                           -1, -1, -1, 4, -1, -1, -1, 5, -1, -1, -1, 6, -1, -1, -1, 7);
    const __m256i to_hi = _mm256_setr_epi8(-1, -1, -1, 8, -1, -1, -1, 9, -1, -1, -1, 10, -1, -1, -1, 11,  //
                                           -1, -1, -1, 12, -1, -1, -1, 13, -1, -1, -1, 14, -1, -1, -1, 15);
    const __m256i b =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(f.d + r * f.cols + c)));
    lo = bits_to_value(_mm256_shuffle_epi8(b, to_lo));
    hi = bits_to_value(_mm256_shuffle_epi8(b, to_hi));
  }
  float at(int64_t r, int64_t c) const {
    const uint32_t u = uint32_t((int32_t(uint32_t(f.d[r * f.cols + c]) << 24) >> 4)) & 0x87FFFFFFu;
    float v;
    std::memcpy(&v, &u, 4);
    return v;
  }
  float scale_at(int64_t r, int64_t c) const { return f.s[((f.row0 + r) >> 7) * f.scale_cols + (c >> 7)] * 0x1p56f; }
};

// blk[i][t] += W[r + i rs][c, c+8) * x[t0+t][c, c+8) for the 8-column chunks in [c0, c1)
// (rs: the distance between the rows of a tile).
template <class F, int RT, int TT>
inline void accumulate(const F& f, int64_t cols, const float* x, int64_t r, int64_t rs, int64_t t0, int64_t c0,
                       int64_t c1, __m256 (&blk)[RT][TT]) {
  int64_t c = c0;
  if constexpr (requires { F::kScaleGroup; }) {  // one scale broadcast per row and group; same sums
    constexpr int64_t G = F::kScaleGroup;
    for (; c % G == 0 && c + G <= c1; c += G) {
      if constexpr (TT == 1) {  // registers to spare: the RT scales held, x loaded once per chunk
        decltype(f.group_scale(r, c)) s[RT];
        for (int i = 0; i < RT; ++i) s[i] = f.group_scale(r + i * rs, c);
        for (int64_t k = c; k < c + G; k += 8) {
          const __m256 xv = _mm256_loadu_ps(x + t0 * cols + k);
          for (int i = 0; i < RT; ++i) blk[i][0] = _mm256_fmadd_ps(f.load_scaled(r + i * rs, k, s[i]), xv, blk[i][0]);
        }
      } else {
        for (int i = 0; i < RT; ++i) {
          const auto s = f.group_scale(r + i * rs, c);
          for (int64_t k = c; k < c + G; k += 8) {
            const __m256 w = f.load_scaled(r + i * rs, k, s);
            for (int t = 0; t < TT; ++t)
              blk[i][t] = _mm256_fmadd_ps(w, _mm256_loadu_ps(x + (t0 + t) * cols + k), blk[i][t]);
          }
        }
      }
    }
  }
  if constexpr (requires(__m256 a) { f.load16(r, c, a, a); }) {  // same sums, wider decode
    for (; c + 16 <= c1; c += 16) {
      __m256 lo[RT], hi[RT];
      for (int i = 0; i < RT; ++i) f.load16(r + i * rs, c, lo[i], hi[i]);
      for (int t = 0; t < TT; ++t) {
        const __m256 xv = _mm256_loadu_ps(x + (t0 + t) * cols + c);
        for (int i = 0; i < RT; ++i) blk[i][t] = _mm256_fmadd_ps(lo[i], xv, blk[i][t]);
      }
      for (int t = 0; t < TT; ++t) {
        const __m256 xv = _mm256_loadu_ps(x + (t0 + t) * cols + c + 8);
        for (int i = 0; i < RT; ++i) blk[i][t] = _mm256_fmadd_ps(hi[i], xv, blk[i][t]);
      }
    }
  }
  for (; c < c1; c += 8) {
    if constexpr (TT < RT) {  // hold the TT x chunks, decode one row at a time: fewer registers
      __m256 xv[TT];
      for (int t = 0; t < TT; ++t) xv[t] = _mm256_loadu_ps(x + (t0 + t) * cols + c);
      for (int i = 0; i < RT; ++i) {
        const __m256 w = f.load(r + i * rs, c);
        for (int t = 0; t < TT; ++t) blk[i][t] = _mm256_fmadd_ps(w, xv[t], blk[i][t]);
      }
    } else {
      __m256 w[RT];
      for (int i = 0; i < RT; ++i) w[i] = f.load(r + i * rs, c);
      for (int t = 0; t < TT; ++t) {
        const __m256 xv = _mm256_loadu_ps(x + (t0 + t) * cols + c);
        for (int i = 0; i < RT; ++i) blk[i][t] = _mm256_fmadd_ps(w[i], xv, blk[i][t]);
      }
    }
  }
}

// tot[i][t] += blk[i][t] * scale of the group at column c0.
template <class F, int RT, int TT>
inline void add_scaled(const F& f, int64_t r, int64_t rs, int64_t c0, const __m256 (&blk)[RT][TT],
                       __m256 (&tot)[RT][TT]) {
  for (int i = 0; i < RT; ++i) {
    const __m256 s = _mm256_set1_ps(f.scale_at(r + i * rs, c0));
    for (int t = 0; t < TT; ++t) tot[i][t] = _mm256_fmadd_ps(blk[i][t], s, tot[i][t]);
  }
}

// sum over c in [cv, cols) of W[r][c] x[c], in order, times the group scale.
template <class F>
__attribute__((noinline)) float tail_sum(const F& f, int64_t r, const float* xt, int64_t group0, int64_t cv,
                                         int64_t cols) {
  float s = 0.0f;
  for (int64_t c = cv; c < cols; ++c) s += f.at(r, c) * xt[c];
  return s * f.scale_at(r, group0);
}

// y[t][r] = hsum(tot) + the tail columns: the common last step of both paths.
template <class F>
inline void finish(const F& f, int64_t cols, const float* x, float* y, int64_t ldy, int64_t r, int64_t t,
                   __m256 tot) {
  const int64_t cv = cols & ~int64_t(7);
  float v = hsum(tot);
  if (cv < cols) {
    int64_t group0 = 0;  // first column of the group holding column cv
    if constexpr (F::kGroup != 0) group0 = (cv / F::kGroup) * F::kGroup;
    v += tail_sum(f, r, x + t * cols, group0, cv, cols);
  }
  y[t * ldy + r] = v;
}

// ---- direct path ----

// Software prefetch of the same columns in the next row tile (one row on in
// each stream of a strided tile, RT rows on in a contiguous one): the
// hardware prefetcher restarts at every 4 KiB page, and a row tile reads RT
// streams that each cross pages often. The address is computed as an
// integer: past the last row it is never dereferenced (prefetches do not fault).
template <_mm_hint Hint>
inline void prefetch_lines(uintptr_t a, uintptr_t len) {
  for (uintptr_t o = 0; o < len; o += 64) _mm_prefetch(reinterpret_cast<const char*>(a + o), Hint);
}

template <class F, int RT>
inline void prefetch_next_tile(const F& f, int64_t cols, int64_t r, int64_t rs, int64_t c0, int64_t c1) {
  const uintptr_t next = uintptr_t(rs == 1 ? RT : 1) * uintptr_t(cols) * F::kBits / 8;
  const uintptr_t len = uintptr_t(c1 - c0) * F::kBits / 8;
  for (int i = 0; i < RT; ++i)
    prefetch_lines<_MM_HINT_T0>(reinterpret_cast<uintptr_t>(f.ptr(r + i * rs, c0)) + next, len);
}

template <class F, int RT, int TT>
void rows_tile(const F& f, int64_t cols, const float* x, float* y, int64_t ldy, int64_t r, int64_t rs, int64_t t0) {
  __m256 tot[RT][TT];
  for (int i = 0; i < RT; ++i)
    for (int t = 0; t < TT; ++t) tot[i][t] = _mm256_setzero_ps();
  const int64_t cv = cols & ~int64_t(7);
  if constexpr (F::kGroup == 0 && (TT > kPrefetchToks || F::kBits == 32)) {
    // F32 streams at bandwidth on hardware prefetch alone (measured ~10%
    // slower with the prefetch blocks at n = 1, and they cost it half its
    // n = 32 speed: 4 x 3 totals plus operands just fit the registers of one loop).
    accumulate<F, RT, TT>(f, cols, x, r, rs, t0, 0, cv, tot);
  } else if constexpr (F::kGroup == 0) {
    constexpr int64_t B = 2048 / F::kBits;  // 256 bytes of a row per prefetch block
    for (int64_t c = 0; c < cv; c += B) {   // the same chain of sums as one call over [0, cv)
      prefetch_next_tile<F, RT>(f, cols, r, rs, c, min64(c + B, cv));
      accumulate<F, RT, TT>(f, cols, x, r, rs, t0, c, min64(c + B, cv), tot);
    }
  } else {
    constexpr int64_t G = F::kGroup;
    int64_t g = 0;
    // INT8 decode: the scales of 8 groups converted at once and broadcast
    // from memory (a load, no shuffle), not one scalar conversion, move and
    // broadcast per group (4 instructions per row and 32 columns; measured
    // +7-8% at n = 1, 1 thread). The same products and sums.
    if constexpr (requires(float* p) { f.scales8(r, g, p); } && TT <= kPrefetchToks) {
      for (; g + 8 * G <= cv; g += 8 * G) {
        alignas(32) float sc[RT][8];
        for (int i = 0; i < RT; ++i) f.scales8(r + i * rs, g, sc[i]);
        for (int j = 0; j < 8; ++j) {
          const int64_t gj = g + j * G;
          prefetch_next_tile<F, RT>(f, cols, r, rs, gj, gj + G);
          __m256 blk[RT][TT];
          for (int i = 0; i < RT; ++i)
            for (int t = 0; t < TT; ++t) blk[i][t] = _mm256_setzero_ps();
          accumulate<F, RT, TT>(f, cols, x, r, rs, t0, gj, gj + G, blk);
          for (int i = 0; i < RT; ++i) {
            const __m256 sv = _mm256_broadcast_ss(&sc[i][j]);
            for (int t = 0; t < TT; ++t) tot[i][t] = _mm256_fmadd_ps(blk[i][t], sv, tot[i][t]);
          }
        }
      }
    }
    for (; g + G <= cv; g += G) {  // whole groups: a fixed trip count
      if constexpr (TT <= kPrefetchToks) prefetch_next_tile<F, RT>(f, cols, r, rs, g, g + G);
      __m256 blk[RT][TT];
      for (int i = 0; i < RT; ++i)
        for (int t = 0; t < TT; ++t) blk[i][t] = _mm256_setzero_ps();
      accumulate<F, RT, TT>(f, cols, x, r, rs, t0, g, g + G, blk);
      add_scaled<F, RT, TT>(f, r, rs, g, blk, tot);
    }
    if (g < cv) {  // a partial last group (FP8, cols % 128 != 0)
      __m256 blk[RT][TT];
      for (int i = 0; i < RT; ++i)
        for (int t = 0; t < TT; ++t) blk[i][t] = _mm256_setzero_ps();
      accumulate<F, RT, TT>(f, cols, x, r, rs, t0, g, cv, blk);
      add_scaled<F, RT, TT>(f, r, rs, g, blk, tot);
    }
  }
  for (int i = 0; i < RT; ++i)
    for (int t = 0; t < TT; ++t) finish(f, cols, x, y, ldy, r + i * rs, t0 + t, tot[i][t]);
}

template <class F>
using RowsTileFn = void (*)(const F&, int64_t, const float*, float*, int64_t, int64_t, int64_t, int64_t);

// Tiles of RT rows x 1..TT tokens.
template <class F, int RT, int TT>
struct RowTiles {
  static constexpr RowsTileFn<F> fns[4] = {rows_tile<F, RT, 1>, rows_tile<F, RT, TT >= 2 ? 2 : 1>,
                                           rows_tile<F, RT, TT >= 3 ? 3 : 1>, rows_tile<F, RT, TT >= 4 ? 4 : 1>};
};

// Rows [r0, r1) in tiles of RT rows, each for tokens in tiles of TT (the last
// one n % TT). The rows of a tile are RT apart by a quarter (for RT = 4) of
// the range, not adjacent: rows r0 + k + i q, q = (r1 - r0) / RT, so the tile
// sweep reads RT sequential streams through distinct parts of the matrix.
// Adjacent rows made the RT streams interleave inside the same few KiB, which
// the hardware prefetchers follow badly when rows are short: one core read a
// 2048 x 512 BF16 matrix at 9-10 GB/s with adjacent rows and 21-22 with
// strided ones, INT8 11-12 -> 14-16 (512 x 2048 INT8: 11-13 -> 12-18; long
// rows, 8192 x 8192, even). A pure read of 4 interleaved streams showed the
// same (512-byte rows: 10-12 GB/s adjacent, 22 strided). The last
// (r1 - r0) % RT rows form one contiguous tile. Which tile a row is in never
// changes its operations.
template <class F, int RT, int TT>
void rows_direct_tiles(const F& f, int64_t cols, const float* x, int64_t n, float* y, int64_t ldy, int64_t r0,
                       int64_t r1) {
  static constexpr const RowsTileFn<F>* by_rows[4] = {RowTiles<F, 1, TT>::fns, RowTiles<F, RT >= 2 ? 2 : 1, TT>::fns,
                                                      RowTiles<F, RT >= 3 ? 3 : 1, TT>::fns,
                                                      RowTiles<F, RT >= 4 ? 4 : 1, TT>::fns};
  const int64_t q = (r1 - r0) / RT;  // rows per stream
  for (int64_t k = 0; k < q; ++k)     // tile k: row r0 + k + i q of each stream i
    for (int64_t t = 0; t < n; t += TT)
      RowTiles<F, RT, TT>::fns[min64(TT, n - t) - 1](f, cols, x, y, ldy, r0 + k, q, t);
  const int64_t r = r0 + RT * q;  // the last (r1 - r0) % RT rows: one tile
  if (r < r1)
    for (int64_t t = 0; t < n; t += TT) by_rows[r1 - r - 1][min64(TT, n - t) - 1](f, cols, x, y, ldy, r, 1, t);
}

// n <= 3: one tile of 4 rows x n tokens. n >= 4: tiles of 3 rows x 4 tokens
// (12 totals, 3 weights, 1 x chunk: the 16 registers), so that n = 4 decodes
// each weight once, not twice as 3 + 1 tokens did (measured, 4096 x 4096, 1
// thread: +30-50% at n = 4 for BF16, FP8, INT4, INT8; also ahead or even at n = 5..16).
template <class F>
void rows_direct(const F& f, int64_t cols, const float* x, int64_t n, float* y, int64_t ldy, int64_t r0,
                 int64_t r1) {
  if (n <= 3)
    rows_direct_tiles<F, kMaxRows, 3>(f, cols, x, n, y, ldy, r0, r1);
  else
    rows_direct_tiles<F, 3, kMaxToks>(f, cols, x, n, y, ldy, r0, r1);
}

// ---- blocked path ----
//
// For n >= blocked_min_tokens: a GEMM blocking of the same operations, so
// that each weight is decoded once per block of up to kBlockToks tokens, not
// once per 4, and both operands of the 3 x 4 register tile come from L1:
//
//   for each block of kBlockToks tokens: pack x (below)
//     for each block of kBlockRows rows: totals[rows][tokens] (memory)
//       for each kBlockCols columns: decode the rows' weights to floats (L1)
//         for each token tile (4), each row tile (3): load the 12 totals,
//           run the columns (per scale group: from zero, then fused in times
//           the scale, as everywhere), store them back.
//
// x is repacked column block by column block, token tile by token tile, as
// [8-column chunk][token][8 floats]: the 4 chunks a tile step reads are one
// contiguous 128 bytes, and a block's x streams from L2 in order.
// Measured on the direct path (bench_matmul, 1 thread, n = 32): its 3 x 4
// tiles reach 80% of FMA peak for BF16 but 53% for FP8, whose decode takes
// the FP pipes the FMAs need, and 47% for INT4.

constexpr int64_t kBlockCols = 256;  // two whole FP8 scale groups
constexpr int64_t kBlockRows = 12;   // 4 row tiles: 12 KiB of decoded floats (measured: 24 x 128 was slower)
constexpr int64_t kBlockToks = 64;   // totals: 12 x 64 x 32 B = 24 KiB
constexpr int kTileRows = 3, kTileToks = 4;
constexpr int64_t kBlockGroups = kBlockCols / 32;  // scale groups per block row, at most

struct alignas(32) Lanes8 {
  float v[8];
};

// xp = x[t0, t0 + nt) columns [0, cv), column block by column block (each
// contiguous: the x a block reads streams from L2 in order), inside a block
// token tile by token tile (of kTileToks; the last nt % 4), inside a tile
// [chunk][token][8]. block_x locates a tile.
inline const float* block_x(const float* xp, int64_t nt, int64_t cv, int64_t c0, int64_t j) {
  return xp + c0 * nt + j * kTileToks * min64(kBlockCols, cv - c0);
}

inline void pack_tokens(const float* x, int64_t cols, int64_t nt, int64_t cv, float* xp) {
  for (int64_t c0 = 0; c0 < cv; c0 += kBlockCols) {
    const int64_t kc = min64(kBlockCols, cv - c0);
    for (int64_t j = 0; j * kTileToks < nt; ++j) {
      const int64_t tt = min64(kTileToks, nt - j * kTileToks);
      float* tile = const_cast<float*>(block_x(xp, nt, cv, c0, j));
      for (int64_t u = 0; u < tt; ++u) {
        const float* xt = x + (j * kTileToks + u) * cols + c0;
        for (int64_t c = 0; c < kc; c += 8) _mm256_store_ps(tile + c * tt + u * 8, _mm256_loadu_ps(xt + c));
      }
    }
  }
}

// Software prefetch of rows [r, r + nr), columns [c0, c1): the block
// decoded next. Each row is a short run, and a block is more streams than
// the hardware prefetchers follow.
template <class F>
inline void prefetch_block(const F& f, int64_t r, int64_t nr, int64_t c0, int64_t c1) {
  const uintptr_t len = uintptr_t(c1 - c0) * F::kBits / 8;
  for (int64_t i = 0; i < nr; ++i) prefetch_lines<_MM_HINT_T1>(reinterpret_cast<uintptr_t>(f.ptr(r + i, c0)), len);
}

// wb[i][0, c1 - c0) = W[r + i][c0, c1) decoded, i < nr (c1 - c0 a multiple of 8).
template <class F>
inline void decode_block(const F& f, int64_t r, int64_t nr, int64_t c0, int64_t c1, float* wb) {
  for (int64_t i = 0; i < nr; ++i) {
    float* out = wb + i * kBlockCols;  // column k at out[k - c0]
    int64_t c = c0;
    if constexpr (requires { F::kScaleGroup; }) {
      for (; c % F::kScaleGroup == 0 && c + F::kScaleGroup <= c1; c += F::kScaleGroup) {
        const auto s = f.group_scale(r + i, c);
        for (int64_t k = c; k < c + F::kScaleGroup; k += 8) _mm256_store_ps(out + (k - c0), f.load_scaled(r + i, k, s));
      }
    }
    if constexpr (requires(__m256 a) { f.load16(r, c, a, a); }) {
      for (; c + 16 <= c1; c += 16) {
        __m256 lo, hi;
        f.load16(r + i, c, lo, hi);
        _mm256_store_ps(out + (c - c0), lo);
        _mm256_store_ps(out + (c - c0) + 8, hi);
      }
    }
    for (; c < c1; c += 8) _mm256_store_ps(out + (c - c0), f.load(r + i, c));
  }
}

// acc[i][u] += wb[i][k] * token u's x[k] over `steps` chunks (token u's
// chunk k at xt + k xs + 8 u): the RT weight chunks held in registers for
// the TT tokens (3 + 1 + 3 x 4 = 16 registers).
template <int RT, int TT>
inline void block_steps(const float* wb, const float* xt, int64_t xs, int64_t steps, __m256 (&acc)[RT][TT]) {
  for (int64_t k = 0; k < steps; ++k) {
    __m256 w[RT];
    for (int i = 0; i < RT; ++i) w[i] = _mm256_load_ps(wb + i * kBlockCols + k * 8);
    for (int u = 0; u < TT; ++u) {
      const __m256 xv = _mm256_load_ps(xt + k * xs + u * 8);
      for (int i = 0; i < RT; ++i) acc[i][u] = _mm256_fmadd_ps(w[i], xv, acc[i][u]);
    }
  }
}

// The columns [c0, c1) of one row tile x token tile: wb its decoded rows,
// xt its packed tokens at column c0, tot its totals (row stride kBlockToks).
// The totals start at zero (c0 == 0: +0, as a stored zero would load).
template <class F, int RT, int TT>
void block_tile(int64_t c0, int64_t c1, const float* wb, const float* sc, const float* xt, float* tot) {
  auto total = [&](int i, int u) { return c0 == 0 ? _mm256_setzero_ps() : _mm256_load_ps(tot + (i * kBlockToks + u) * 8); };
  if constexpr (F::kGroup == 0) {
    __m256 acc[RT][TT];
    for (int i = 0; i < RT; ++i)
      for (int u = 0; u < TT; ++u) acc[i][u] = total(i, u);
    block_steps<RT, TT>(wb, xt, TT * 8, (c1 - c0) / 8, acc);
    for (int i = 0; i < RT; ++i)
      for (int u = 0; u < TT; ++u) _mm256_store_ps(tot + (i * kBlockToks + u) * 8, acc[i][u]);
  } else {
    // Per scale group: the sums from zero in registers, then fused into the
    // totals in memory (12 more registers would spill). FP8's 16 steps per
    // group carry that; INT8's 4 would not (it stays on the direct path).
    for (int64_t g = c0; g < c1; g += F::kGroup) {  // the last group may be partial
      const int64_t g1 = min64(g + F::kGroup, c1);
      __m256 acc[RT][TT];
      for (int i = 0; i < RT; ++i)
        for (int u = 0; u < TT; ++u) acc[i][u] = _mm256_setzero_ps();
      block_steps<RT, TT>(wb + (g - c0), xt + (g - c0) * TT, TT * 8, (g1 - g) / 8, acc);
      for (int i = 0; i < RT; ++i) {
        const __m256 s = _mm256_broadcast_ss(sc + i * kBlockGroups + (g - c0) / F::kGroup);
        for (int u = 0; u < TT; ++u) {
          const __m256 t = g == 0 ? _mm256_setzero_ps() : _mm256_load_ps(tot + (i * kBlockToks + u) * 8);
          _mm256_store_ps(tot + (i * kBlockToks + u) * 8, _mm256_fmadd_ps(acc[i][u], s, t));
        }
      }
    }
  }
}

template <class F>
using BlockTileFn = void (*)(int64_t, int64_t, const float*, const float*, const float*, float*);

template <class F, int RT>
struct BlockTiles {
  static constexpr BlockTileFn<F> fns[4] = {block_tile<F, RT, 1>, block_tile<F, RT, 2>, block_tile<F, RT, 3>,
                                            block_tile<F, RT, 4>};
};

// Smallest n that takes the blocked path; 0: never. Measured (1 thread,
// 512 x 2048, GFLOP/s direct -> blocked, alternating runs): FP8 n = 8 53 ->
// 50, n = 12 52 -> 54, n = 16 52 -> 55, n = 20 50 -> 62, n = 64 50 -> 68;
// INT4 n = 8 54 -> 50, n = 12 53 -> 55, n = 16 50 -> 60, n = 64 46 -> 71.
// Where the decode is cheap the direct tiles stay ahead or even (n = 32:
// BF16 77 -> 69, F32 67 -> 66, INT8 52 -> 44: its 32-column groups load,
// fuse and store the totals every 4 steps).
template <class F>
constexpr int64_t blocked_min_tokens() {
  if constexpr (std::is_same_v<F, Fp8Format>) return 12;
  if constexpr (std::is_same_v<F, Int4Weights>) return 12;
  return 0;
}

template <class F>
void rows_blocked(const F& f, int64_t cols, const float* x, int64_t n, float* y, int64_t ldy, int64_t r0,
                  int64_t r1) {
  static constexpr const BlockTileFn<F>* by_rows[3] = {BlockTiles<F, 1>::fns, BlockTiles<F, 2>::fns,
                                                       BlockTiles<F, 3>::fns};
  const int64_t cv = cols & ~int64_t(7);
  struct Buffers {  // 32-byte aligned (C++17 allocators honour alignof)
    std::vector<Lanes8> xp, wb, tot;
    float sc[kBlockRows * kBlockGroups];  // scale of block row i, group j at [i * kBlockGroups + j]
    float* x() { return reinterpret_cast<float*>(xp.data()); }  // (empty when cols < 8)
    float* w() { return reinterpret_cast<float*>(wb.data()); }
  };
  thread_local Buffers b;
  b.xp.resize(size_t(kBlockToks * cv / 8));
  b.wb.resize(size_t(kBlockRows * kBlockCols / 8));
  b.tot.resize(size_t(kBlockRows * kBlockToks));
  for (int64_t t0 = 0; t0 < n; t0 += kBlockToks) {
    const int64_t nt = min64(kBlockToks, n - t0);
    pack_tokens(x + t0 * cols, cols, nt, cv, b.x());
    for (int64_t rb = r0; rb < r1; rb += kBlockRows) {
      const int64_t nr = min64(kBlockRows, r1 - rb);
      if (cv == 0)  // no column block to start the totals (cols < 8: only the tail)
        for (int64_t i = 0; i < nr; ++i)
          for (int64_t t = 0; t < nt; ++t) b.tot[size_t(i * kBlockToks + t)] = Lanes8{};
      for (int64_t c0 = 0; c0 < cv; c0 += kBlockCols) {
        const int64_t c1 = min64(c0 + kBlockCols, cv);
        if (c1 < cv)  // the next block: these rows' next columns, or the next rows' first
          prefetch_block(f, rb, nr, c1, min64(c1 + kBlockCols, cv));
        else if (rb + nr < r1)
          prefetch_block(f, rb + nr, min64(kBlockRows, r1 - rb - nr), 0, min64(kBlockCols, cv));
        decode_block(f, rb, nr, c0, c1, b.w());
        if constexpr (F::kGroup != 0)
          for (int64_t i = 0; i < nr; ++i)
            for (int64_t g = c0; g < c1; g += F::kGroup) b.sc[i * kBlockGroups + (g - c0) / F::kGroup] = f.scale_at(rb + i, g);
        for (int64_t j = 0; j * kTileToks < nt; ++j) {
          const int64_t tt = min64(kTileToks, nt - j * kTileToks);
          const float* xt = block_x(b.x(), nt, cv, c0, j);
          for (int64_t i = 0; i < nr; i += kTileRows)
            by_rows[min64(kTileRows, nr - i) - 1][tt - 1](c0, c1, b.w() + i * kBlockCols, b.sc + i * kBlockGroups, xt,
                                                          b.tot[size_t(i * kBlockToks + j * kTileToks)].v);
        }
      }
      for (int64_t t = 0; t < nt; ++t)  // token by token: the nr outputs of a token share cache lines
        for (int64_t i = 0; i < nr; ++i) finish(f, cols, x, y, ldy, rb + i, t0 + t, _mm256_load_ps(b.tot[size_t(i * kBlockToks + t)].v));
    }
  }
}

}  // namespace

void matmul_rows(const QMatrix& W, const float* x, int64_t n, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  auto run = [&](const auto& f) {
    using F = std::decay_t<decltype(f)>;
    if constexpr (blocked_min_tokens<F>() > 0)
      if (n >= blocked_min_tokens<F>()) return rows_blocked(f, W.cols, x, n, y, ldy, r0, r1);
    rows_direct(f, W.cols, x, n, y, ldy, r0, r1);
  };
  with_decoder(W, [&](const auto& f) {
    using F = std::decay_t<decltype(f)>;
    if constexpr (std::is_same_v<F, Int4Format>) {
      run(Int4Weights{f});
    } else if constexpr (std::is_same_v<F, Fp8Format>) {
      if (n > 3) return run(f);            // Fp8Shifted lost 20% in the 3 x 4 tiles (registers)
      thread_local std::vector<float> xs;  // x * 2^64 (Fp8Shifted)
      xs.resize(size_t(n * W.cols));
      for (int64_t i = 0; i < n * W.cols; ++i) xs[size_t(i)] = x[i] * Fp8Shifted::kXScale;
      x = xs.data();
      run(Fp8Shifted{f});
    } else {
      run(f);
    }
  });
}

}  // namespace avx2
}  // namespace trillion
