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

// blk[i][t] += W[r+i][c, c+8) * x[t0+t][c, c+8) for the 8-column chunks in [c0, c1).
template <class F, int RT, int TT>
inline void accumulate(const F& f, int64_t cols, const float* x, int64_t r, int64_t t0, int64_t c0, int64_t c1,
                       __m256 (&blk)[RT][TT]) {
  int64_t c = c0;
  if constexpr (requires(__m256 a) { f.load16(r, c, a, a); }) {  // same sums, wider decode
    for (; c + 16 <= c1; c += 16) {
      __m256 lo[RT], hi[RT];
      for (int i = 0; i < RT; ++i) f.load16(r + i, c, lo[i], hi[i]);
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
    __m256 w[RT];
    for (int i = 0; i < RT; ++i) w[i] = f.load(r + i, c);
    for (int t = 0; t < TT; ++t) {
      const __m256 xv = _mm256_loadu_ps(x + (t0 + t) * cols + c);
      for (int i = 0; i < RT; ++i) blk[i][t] = _mm256_fmadd_ps(w[i], xv, blk[i][t]);
    }
  }
}

// tot[i][t] += blk[i][t] * scale of the group at column c0.
template <class F, int RT, int TT>
inline void add_scaled(const F& f, int64_t r, int64_t c0, const __m256 (&blk)[RT][TT], __m256 (&tot)[RT][TT]) {
  for (int i = 0; i < RT; ++i) {
    const __m256 s = _mm256_set1_ps(f.scale_at(r + i, c0));
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

template <class F, int RT, int TT>
void rows_tile(const F& f, int64_t cols, const float* x, float* y, int64_t ldy, int64_t r, int64_t t0) {
  __m256 tot[RT][TT];
  for (int i = 0; i < RT; ++i)
    for (int t = 0; t < TT; ++t) tot[i][t] = _mm256_setzero_ps();
  int64_t group0 = 0;  // first column of the last (possibly partial) group
  if constexpr (F::kGroup == 0) {
    accumulate<F, RT, TT>(f, cols, x, r, t0, 0, cols & ~int64_t(7), tot);
  } else {
    constexpr int64_t G = F::kGroup;
    for (; group0 + G <= cols; group0 += G) {
      __m256 blk[RT][TT];
      for (int i = 0; i < RT; ++i)
        for (int t = 0; t < TT; ++t) blk[i][t] = _mm256_setzero_ps();
      accumulate<F, RT, TT>(f, cols, x, r, t0, group0, group0 + G, blk);
      add_scaled<F, RT, TT>(f, r, group0, blk, tot);
    }
    if (group0 < cols) {  // a partial last group (FP8 with cols % 128 != 0)
      __m256 blk[RT][TT];
      for (int i = 0; i < RT; ++i)
        for (int t = 0; t < TT; ++t) blk[i][t] = _mm256_setzero_ps();
      accumulate<F, RT, TT>(f, cols, x, r, t0, group0, cols & ~int64_t(7), blk);
      add_scaled<F, RT, TT>(f, r, group0, blk, tot);
    }
  }
  const int64_t cv = cols & ~int64_t(7);
  for (int i = 0; i < RT; ++i)
    for (int t = 0; t < TT; ++t) {
      float v = hsum(tot[i][t]);
      if (cv < cols) v += tail_sum(f, r + i, x + (t0 + t) * cols, group0 < cols ? group0 : group0 - F::kGroup, cv, cols);
      y[(t0 + t) * ldy + r + i] = v;
    }
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
