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
// Both paths (below) perform exactly these operations on exactly these values
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
//
// Files: this one holds the entry point (which path a call takes) and the
// direct path; matmul_avx2_blocked.cpp the blocked path;
// matmul_avx2_shared.hpp what both run (the INT4 decoder, the last step).
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/kernel_table.hpp"
#include "kernels/x86/matmul_avx2_shared.hpp"

namespace trillion {
namespace avx2 {
namespace {

constexpr int kMaxRows = 4, kMaxToks = 4;
// Tiles of up to this many tokens prefetch the next row tile (below): 1..3
// token tiles still wait on memory (faster with it at n = 2, 3 for BF16, FP8,
// INT8); the 4-token tiles are compute bound, and BF16 lost with the blocks there.
constexpr int kPrefetchToks = 3;

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
// Faster than F16C's conversion at n = 1, from L2 and from memory
// (bench_matmul, 1 thread).
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

// Software prefetch of the same columns in the next row tile (one row on in
// each stream of a strided tile, RT rows on in a contiguous one): the
// hardware prefetcher restarts at every 4 KiB page, and a row tile reads RT
// streams that each cross pages often. The address is computed as an
// integer: past the last row it is never dereferenced (prefetches do not fault).
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
    // F32 streams at bandwidth on hardware prefetch alone (slower with the
    // prefetch blocks at n = 1, and they cost it half its n = 32 speed: 4 x 3
    // totals plus operands just fit the registers of one loop).
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
    // broadcast per group (4 instructions per row and 32 columns; faster at
    // n = 1). The same products and sums.
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
// 2048 x 512 BF16 matrix at about half the rate with adjacent rows (INT8
// gained less; long rows, 8192 x 8192, even). A pure read of 4 interleaved
// streams showed the same. The last
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
// each weight once, not twice as 3 + 1 tokens did (a third faster or more at
// n = 4 for every format; ahead or even at n = 5..16).
template <class F>
void rows_direct(const F& f, int64_t cols, const float* x, int64_t n, float* y, int64_t ldy, int64_t r0,
                 int64_t r1) {
  if (n <= 3)
    rows_direct_tiles<F, kMaxRows, 3>(f, cols, x, n, y, ldy, r0, r1);
  else
    rows_direct_tiles<F, 3, kMaxToks>(f, cols, x, n, y, ldy, r0, r1);
}

}  // namespace

void matmul_rows(const QMatrix& W, const float* x, int64_t n, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  const int64_t blocked_from = blocked_min_tokens(W.format);
  if (blocked_from > 0 && n >= blocked_from) return matmul_rows_blocked(W, x, n, y, ldy, r0, r1);
  with_decoder(W, [&](const auto& f) {
    using F = std::decay_t<decltype(f)>;
    if constexpr (std::is_same_v<F, Int4Format>) {
      rows_direct(Int4Weights{f}, W.cols, x, n, y, ldy, r0, r1);
    } else if constexpr (std::is_same_v<F, Fp8Format>) {
      // Fp8Shifted lost 20% in the 3 x 4 tiles (registers)
      if (n > 3) return rows_direct(f, W.cols, x, n, y, ldy, r0, r1);
      thread_local std::vector<float> xs;  // x * 2^64 (Fp8Shifted)
      xs.resize(size_t(n * W.cols));
      for (int64_t i = 0; i < n * W.cols; ++i) xs[size_t(i)] = x[i] * Fp8Shifted::kXScale;
      rows_direct(Fp8Shifted{f}, W.cols, xs.data(), n, y, ldy, r0, r1);
    } else {
      rows_direct(f, W.cols, x, n, y, ldy, r0, r1);
    }
  });
}

}  // namespace avx2
}  // namespace trillion