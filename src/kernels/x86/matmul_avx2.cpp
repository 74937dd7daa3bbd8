// AVX2 matmul: y[t][r] = sum_c W[r][c] x[t][c], register tiles of up to
// 4 rows x 3 tokens sharing each decoded weight vector.
//
// Per output element, whatever tile it falls in: one 8-lane FMA accumulator
// per scale group (128 FP8, 32 INT4, the whole row otherwise) over the
// group's columns in steps of 8; fused into the 8-lane total times the group
// scale; hsum's fixed tree; then the columns past the last multiple of 8
// (summed in order, times their scale) added last.
#include "kernels/kernel_table.hpp"
#include "kernels/x86/avx2_formats.hpp"

namespace trillion {
namespace avx2 {
namespace {

constexpr int kMaxRows = 4, kMaxToks = 3;

template <class F, int RT, int TT>
void rows_tile(const F& f, int64_t cols, const float* x, float* y, int64_t ldy, int64_t r, int64_t t0) {
  __m256 tot[RT][TT];
  float tail[RT][TT];
  for (int i = 0; i < RT; ++i)
    for (int t = 0; t < TT; ++t) tot[i][t] = _mm256_setzero_ps(), tail[i][t] = 0.0f;
  const int64_t gw = F::kGroup ? F::kGroup : cols;
  for (int64_t c0 = 0; c0 < cols; c0 += gw) {
    const int64_t c1 = min64(cols, c0 + gw), cv = c0 + ((c1 - c0) & ~int64_t(7));
    __m256 blk[RT][TT];
    for (int i = 0; i < RT; ++i)
      for (int t = 0; t < TT; ++t) blk[i][t] = _mm256_setzero_ps();
    for (int64_t c = c0; c < cv; c += 8) {
      __m256 w[RT];
      for (int i = 0; i < RT; ++i) w[i] = f.load(r + i, c);
      for (int t = 0; t < TT; ++t) {
        const __m256 xv = _mm256_loadu_ps(x + (t0 + t) * cols + c);
        for (int i = 0; i < RT; ++i) blk[i][t] = _mm256_fmadd_ps(w[i], xv, blk[i][t]);
      }
    }
    for (int i = 0; i < RT; ++i) {
      if constexpr (F::kGroup == 0) {
        for (int t = 0; t < TT; ++t) tot[i][t] = blk[i][t];
      } else {
        const __m256 s = _mm256_set1_ps(f.scale_at(r + i, c0));
        for (int t = 0; t < TT; ++t) tot[i][t] = _mm256_fmadd_ps(blk[i][t], s, tot[i][t]);
      }
      if (cv == c1) continue;  // only the last group can have a tail
      for (int t = 0; t < TT; ++t) {
        float ts = 0.0f;
        for (int64_t c = cv; c < c1; ++c) ts += f.at(r + i, c) * x[(t0 + t) * cols + c];
        tail[i][t] = ts * f.scale_at(r + i, c0);
      }
    }
  }
  for (int i = 0; i < RT; ++i)
    for (int t = 0; t < TT; ++t) y[(t0 + t) * ldy + r + i] = hsum(tot[i][t]) + tail[i][t];
}

template <class F>
using RowsTileFn = void (*)(const F&, int64_t, const float*, float*, int64_t, int64_t, int64_t);

template <class F, int RT>
struct RowTiles {
  static constexpr RowsTileFn<F> fns[kMaxToks] = {rows_tile<F, RT, 1>, rows_tile<F, RT, 2>, rows_tile<F, RT, 3>};
};

template <class F>
void rows(const F& f, int64_t cols, const float* x, int64_t n, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  static constexpr const RowsTileFn<F>* by_rows[kMaxRows] = {RowTiles<F, 1>::fns, RowTiles<F, 2>::fns,
                                                             RowTiles<F, 3>::fns, RowTiles<F, 4>::fns};
  for (int64_t r = r0; r < r1; r += kMaxRows) {
    const RowsTileFn<F>* fns = by_rows[min64(kMaxRows, r1 - r) - 1];
    for (int64_t t = 0; t < n; t += kMaxToks) fns[min64(kMaxToks, n - t) - 1](f, cols, x, y, ldy, r, t);
  }
}

}  // namespace

void matmul_rows(const QMatrix& W, const float* x, int64_t n, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  with_decoder(W, [&](const auto& f) { rows(f, W.cols, x, n, y, ldy, r0, r1); });
}

}  // namespace avx2
}  // namespace trillion
