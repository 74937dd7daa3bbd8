// arm64 NEON transposed matmul: y[t][c] = sum_r x[t][r] W[r][c], register
// tiles of up to 2 tokens x 32 columns (16 accumulators) held across the
// whole reduction, so each decoded weight vector serves both tokens.
//
// Per output element, whatever tile it falls in: for r in increasing order,
// acc = fma(stored value, x[t][r] * scale, acc) (vfmaq, one lane per column);
// columns past the last multiple of 8 of the matrix use the same order in
// scalar code (std::fma, so they round like the lanes). c0 is a multiple of 32
// and c1 a multiple of 32 or cols, so a column's code path is a property of
// the column alone.
#include <cmath>
#include <type_traits>

#include "kernels/arm/neon_formats.hpp"
#include "kernels/kernel_table.hpp"

namespace trillion {
namespace neon {
namespace {

constexpr int kMaxToks = 2;

// Columns [c, c + 8*CV) for tokens [t0, t0 + TT); the columns lie in one scale group.
template <class F, int TT, int CV>
void cols_tile(const F& f, int64_t rows, int64_t cols, const float* x, float* y, int64_t t0, int64_t c) {
  V8 acc[TT][CV];
  for (int t = 0; t < TT; ++t)
    for (int v = 0; v < CV; ++v) acc[t][v] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
  for (int64_t r = 0; r < rows; ++r) {
    V8 w[CV];
    for (int v = 0; v < CV; ++v) w[v] = f.load(r, c + 8 * v);
    const float s = f.scale_at(r, c);
    for (int t = 0; t < TT; ++t) {
      const float32x4_t xs = vdupq_n_f32(x[(t0 + t) * rows + r] * s);
      for (int v = 0; v < CV; ++v) {
        acc[t][v].lo = vfmaq_f32(acc[t][v].lo, w[v].lo, xs);
        acc[t][v].hi = vfmaq_f32(acc[t][v].hi, w[v].hi, xs);
      }
    }
  }
  for (int t = 0; t < TT; ++t)
    for (int v = 0; v < CV; ++v) {
      vst1q_f32(y + (t0 + t) * cols + c + 8 * v, acc[t][v].lo);
      vst1q_f32(y + (t0 + t) * cols + c + 8 * v + 4, acc[t][v].hi);
    }
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

}  // namespace

void matmul_t_cols(const QMatrix& W, const float* x, int64_t n, float* y, int64_t c0, int64_t c1) {
  with_decoder(W, [&](const auto& f) {
    int64_t t = 0;
    for (; t + kMaxToks <= n; t += kMaxToks) token_tile<std::decay_t<decltype(f)>, kMaxToks>(f, W.rows, W.cols, x, y, t, c0, c1);
    if (t < n) token_tile<std::decay_t<decltype(f)>, 1>(f, W.rows, W.cols, x, y, t, c0, c1);
  });
}

}  // namespace neon
}  // namespace trillion
