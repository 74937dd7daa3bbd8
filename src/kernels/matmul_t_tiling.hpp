// The ISA-neutral part of the transposed matmul (y[t][c] = sum_r x[t][r]
// W[r][c]): the walk over a column range in register tiles of TT tokens x
// 8*CV columns, and the scalar tail. An ISA file (x86/matmul_t_avx2.cpp,
// arm/matmul_t_neon.cpp) gives only its register tile, as
//   struct Tile { template <class F, int TT, int CV> static void cols(...); };
// Internal linkage (an anonymous namespace), as peak_chains.hpp: each ISA
// file instantiates its own copy with its own flags, no ODR clash between them.
//
// Per output element, whatever tile it falls in: for r in increasing order,
// acc = fma(stored value, x[t][r] * scale, acc); columns past the last
// multiple of 8 of the matrix use the same order in scalar code (std::fma,
// so they round like the lanes). c0 is a multiple of 32 and c1 a multiple
// of 8 or cols, so a column's vector-or-scalar path is a property of the
// column alone.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace trillion {
namespace {

template <class F>
void t_cols_scalar(const F& f, int64_t rows, int64_t cols, const float* x, float* y, int64_t t, int64_t c) {
  float acc = 0.0f;
  for (int64_t r = 0; r < rows; ++r) acc = std::fma(f.at(r, c), x[t * rows + r] * f.scale_at(r, c), acc);
  y[t * cols + c] = acc;
}

template <class Tile, class F, int TT>
void t_token_tile(const F& f, int64_t rows, int64_t cols, const float* x, float* y, int64_t t0, int64_t c0,
                  int64_t c1) {
  const int64_t vec_end = std::min<int64_t>(c1, cols & ~int64_t(7));
  int64_t c = c0;
  for (; c + 32 <= vec_end; c += 32) Tile::template cols<F, TT, 4>(f, rows, cols, x, y, t0, c);
  for (; c + 8 <= vec_end; c += 8) Tile::template cols<F, TT, 1>(f, rows, cols, x, y, t0, c);
  for (; c < c1; ++c)
    for (int t = 0; t < TT; ++t) t_cols_scalar(f, rows, cols, x, y, t0 + t, c);
}

// Every token of the call: tiles of MaxToks tokens, then the rest (at most
// 3 tokens a tile: a larger tile would need more registers than either ISA's
// tile holds across the reduction).
template <class Tile, int MaxToks, class F>
void t_cols(const F& f, int64_t rows, int64_t ncols, const float* x, int64_t n, float* y, int64_t c0, int64_t c1) {
  static_assert(MaxToks >= 1 && MaxToks <= 3);
  int64_t t = 0;
  for (; t + MaxToks <= n; t += MaxToks) t_token_tile<Tile, F, MaxToks>(f, rows, ncols, x, y, t, c0, c1);
  if (n - t == 2) t_token_tile<Tile, F, 2>(f, rows, ncols, x, y, t, c0, c1);
  if (n - t == 1) t_token_tile<Tile, F, 1>(f, rows, ncols, x, y, t, c0, c1);
}

}  // namespace
}  // namespace trillion
