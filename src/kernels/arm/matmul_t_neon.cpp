// arm64 NEON transposed matmul: register tiles of up to 2 tokens x 32
// columns (16 accumulators) held across the whole reduction, so each decoded
// weight vector serves both tokens; the walk over tiles, the scalar tail and
// the arithmetic every output follows (vfmaq, one lane per column) are
// matmul_t_tiling.hpp's.
#include "kernels/arm/neon_formats.hpp"
#include "kernels/kernel_table.hpp"
#include "kernels/matmul_t_tiling.hpp"

namespace trillion {
namespace neon {
namespace {

struct Tile {
  // Columns [c, c + 8*CV) for tokens [t0, t0 + TT); the columns lie in one scale group.
  template <class F, int TT, int CV>
  static void cols(const F& f, int64_t rows, int64_t cols, const float* x, float* y, int64_t t0, int64_t c);
};

template <class F, int TT, int CV>
void Tile::cols(const F& f, int64_t rows, int64_t cols, const float* x, float* y, int64_t t0, int64_t c) {
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

}  // namespace

void matmul_t_cols(const QMatrix& W, const float* x, int64_t n, float* y, int64_t c0, int64_t c1) {
  with_decoder(W, [&](const auto& f) { t_cols<Tile, 2>(f, W.rows, W.cols, x, n, y, c0, c1); });
}

}  // namespace neon
}  // namespace trillion
