// AVX2 transposed matmul: register tiles of up to 3 tokens x 32 columns held
// across the whole reduction; the walk over tiles, the scalar tail and the
// arithmetic every output follows are matmul_t_tiling.hpp's.
#include "kernels/kernel_table.hpp"
#include "kernels/matmul_t_tiling.hpp"
#include "kernels/x86/avx2_formats.hpp"

namespace trillion {
namespace avx2 {
namespace {

struct Tile {
  // Columns [c, c + 8*CV) for tokens [t0, t0 + TT); the columns lie in one scale group.
  template <class F, int TT, int CV>
  static void cols(const F& f, int64_t rows, int64_t cols, const float* x, float* y, int64_t t0, int64_t c);
};

template <class F, int TT, int CV>
void Tile::cols(const F& f, int64_t rows, int64_t cols, const float* x, float* y, int64_t t0, int64_t c) {
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

}  // namespace

void matmul_t_cols(const QMatrix& W, const float* x, int64_t n, float* y, int64_t c0, int64_t c1) {
  with_decoder(W, [&](const auto& f) { t_cols<Tile, 3>(f, W.rows, W.cols, x, n, y, c0, c1); });
}

}  // namespace avx2
}  // namespace trillion
