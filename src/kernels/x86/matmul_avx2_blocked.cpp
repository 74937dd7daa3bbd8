// AVX2 matmul, the blocked path (FP8 and INT4 at n >= blocked_min_tokens).
// Apart from the direct path (matmul_avx2.cpp, which states the operations
// every output element goes through, and dispatches) because it is a second
// schedule of the same sums with its own buffers and tiles; the two share
// matmul_avx2_shared.hpp (the INT4 decoder, the last step, prefetching).
//
// A GEMM blocking of the direct path's operations, so that each weight is
// decoded once per block of up to kBlockToks tokens, not once per 4, and both
// operands of the 3 x 4 register tile come from L1:
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
// On the direct path (bench_matmul, 1 thread, n = 32) the 3 x 4 tiles come
// near the FMA peak for BF16 but reach only about half of it for FP8, whose
// decode takes the FP pipes the FMAs need, and for INT4.
#include <cstdint>
#include <vector>

#include "kernels/x86/matmul_avx2_shared.hpp"

namespace trillion {
namespace avx2 {
namespace {

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

void matmul_rows_blocked(const QMatrix& W, const float* x, int64_t n, float* y, int64_t ldy, int64_t r0,
                         int64_t r1) {
  if (W.format == MatFormat::FP8_B128)
    rows_blocked(Fp8Format(W), W.cols, x, n, y, ldy, r0, r1);
  else
    rows_blocked(Int4Weights{Int4Format(W)}, W.cols, x, n, y, ldy, r0, r1);
}

}  // namespace avx2
}  // namespace trillion
