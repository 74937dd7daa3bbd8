// AVX2 transposed matmul: y[t][c] = sum_r x[t][r] W[r][c], register tiles of
// up to 3 tokens x 32 columns held across the whole reduction.
//
// Per output element, whatever tile it falls in: for r in increasing order,
// acc = fma(stored value, x[t][r] * scale, acc); columns past the last
// multiple of 8 of the matrix use the same order in scalar code (std::fma, so
// they round like the lanes, as in the NEON twin matmul_t_neon.cpp).
#include <cmath>

#include "kernels/kernel_table.hpp"
#include "kernels/x86/avx2_formats.hpp"

namespace trillion {
namespace avx2 {
namespace {

constexpr int kMaxToks = 3;

// Columns [c, c + 8*CV) for tokens [t0, t0 + TT); the columns lie in one scale group.
template <class F, int TT, int CV>
void cols_tile(const F& f, int64_t rows, int64_t cols, const float* x, float* y, int64_t t0, int64_t c) {
  __m256 acc[TT][CV];
  for (int t = 0; t < TT; ++t)
    for (int v = 0; v < CV; ++v) acc[t][v] = _mm256_setzero_ps();
  for (int64_t r = 0; r < rows; ++r) {
    __m256 w[CV];
    for (int v = 0; v < CV; ++v) w[v] = f.load(r, c + 8 * v);
    const float s = f.scale_at(r, c);
    for (int t = 0; t < TT; ++t) {
      const __m256 xs = _mm256_set1_ps(x[(t0 + t) * rows + r] * s);
      for (int v = 0; v < CV; ++v) acc[t][v] = _mm256_fmadd_ps(w[v], xs, acc[t][v]);
    }
  }
  for (int t = 0; t < TT; ++t)
    for (int v = 0; v < CV; ++v) _mm256_storeu_ps(y + (t0 + t) * cols + c + 8 * v, acc[t][v]);
}

template <class F>
void cols_scalar(const F& f, int64_t rows, int64_t cols, const float* x, float* y, int64_t t, int64_t c) {
  float acc = 0.0f;
  for (int64_t r = 0; r < rows; ++r) acc = std::fma(f.at(r, c), x[t * rows + r] * f.scale_at(r, c), acc);
  y[t * cols + c] = acc;
}

template <class F, int TT>
void token_tile(const F& f, int64_t rows, int64_t cols, const float* x, float* y, int64_t t0, int64_t c0,
                int64_t c1) {
  const int64_t vec_end = min64(c1, cols & ~int64_t(7));
  int64_t c = c0;
  for (; c + 32 <= vec_end; c += 32) cols_tile<F, TT, 4>(f, rows, cols, x, y, t0, c);
  for (; c + 8 <= vec_end; c += 8) cols_tile<F, TT, 1>(f, rows, cols, x, y, t0, c);
  for (; c < c1; ++c)
    for (int t = 0; t < TT; ++t) cols_scalar(f, rows, cols, x, y, t0 + t, c);
}

template <class F>
void cols(const F& f, int64_t rows, int64_t ncols, const float* x, int64_t n, float* y, int64_t c0, int64_t c1) {
  int64_t t = 0;
  for (; t + kMaxToks <= n; t += kMaxToks) token_tile<F, kMaxToks>(f, rows, ncols, x, y, t, c0, c1);
  if (n - t == 2) token_tile<F, 2>(f, rows, ncols, x, y, t, c0, c1);
  if (n - t == 1) token_tile<F, 1>(f, rows, ncols, x, y, t, c0, c1);
}

}  // namespace

// c0 is a multiple of 32 and c1 a multiple of 8 or cols, so every column's
// vector-or-scalar path is a property of the column alone.
void matmul_t_cols(const QMatrix& W, const float* x, int64_t n, float* y, int64_t c0, int64_t c1) {
  with_decoder(W, [&](const auto& f) { cols(f, W.rows, W.cols, x, n, y, c0, c1); });
}

}  // namespace avx2
}  // namespace trillion
