// arm64 NEON matmul: y[t][r] = sum_c W[r][c] x[t][c], register tiles of up to
// 4 rows x 2 tokens sharing each decoded weight vector. The transposed product
// is in matmul_t_neon.cpp, dot and axpy in vector_neon.cpp.
//
// Per output element, whatever tile it falls in: two 4-lane FMA accumulators
// (columns c..c+3 and c+4..c+7 of each 8-column chunk) per scale group (128
// FP8, 32 INT4, the whole row otherwise) over the group's chunks in order;
// each fused into its 4-lane total times the group scale; the totals added
// (lo + hi), then lanes (0+2)+(1+3); then the columns past the last multiple
// of 8 (summed in order, times their scale) added last.
#include "kernels/arm/neon_formats.hpp"
#include "kernels/expf.hpp"
#include "kernels/kernel_table.hpp"
#include "kernels/matmul_row_tail.hpp"

namespace trillion {
namespace neon {
namespace {

constexpr int kMaxRows = 4, kMaxToks = 2;

template <class F, int RT, int TT>
inline void accumulate(const F& f, int64_t cols, const float* x, int64_t r, int64_t t0, int64_t c0, int64_t c1,
                       V8 (&blk)[RT][TT]) {
  for (int64_t c = c0; c < c1; c += 8) {
    V8 w[RT];
    for (int i = 0; i < RT; ++i) w[i] = f.load(r + i, c);
    for (int t = 0; t < TT; ++t) {
      const float* xt = x + (t0 + t) * cols + c;
      const float32x4_t xl = vld1q_f32(xt), xh = vld1q_f32(xt + 4);
      for (int i = 0; i < RT; ++i) {
        blk[i][t].lo = vfmaq_f32(blk[i][t].lo, w[i].lo, xl);
        blk[i][t].hi = vfmaq_f32(blk[i][t].hi, w[i].hi, xh);
      }
    }
  }
}

template <class F, int RT, int TT>
void rows_tile(const F& f, int64_t cols, const float* x, float* y, int64_t ldy, int64_t r, int64_t t0) {
  V8 tot[RT][TT];
  for (int i = 0; i < RT; ++i)
    for (int t = 0; t < TT; ++t) tot[i][t] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
  const int64_t cv = cols & ~int64_t(7);
  if constexpr (F::kGroup == 0) {
    accumulate<F, RT, TT>(f, cols, x, r, t0, 0, cv, tot);
  } else {
    for (int64_t g = 0; g < cv; g += F::kGroup) {
      V8 blk[RT][TT];
      for (int i = 0; i < RT; ++i)
        for (int t = 0; t < TT; ++t) blk[i][t] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
      accumulate<F, RT, TT>(f, cols, x, r, t0, g, min64(g + F::kGroup, cv), blk);
      for (int i = 0; i < RT; ++i) {
        const float32x4_t s = vdupq_n_f32(f.scale_at(r + i, g));
        for (int t = 0; t < TT; ++t) {
          tot[i][t].lo = vfmaq_f32(tot[i][t].lo, blk[i][t].lo, s);
          tot[i][t].hi = vfmaq_f32(tot[i][t].hi, blk[i][t].hi, s);
        }
      }
    }
  }
  for (int i = 0; i < RT; ++i)
    for (int t = 0; t < TT; ++t) {
      const float32x4_t v = vaddq_f32(tot[i][t].lo, tot[i][t].hi);
      const float32x2_t p = vadd_f32(vget_low_f32(v), vget_high_f32(v));  // (0+2), (1+3)
      float sum = vget_lane_f32(p, 0) + vget_lane_f32(p, 1);
      if (cv < cols) {
        int64_t group0 = 0;
        if constexpr (F::kGroup != 0) group0 = (cv / F::kGroup) * F::kGroup;
        sum += tail_sum(f, r + i, x + (t0 + t) * cols, group0, cv, cols);
      }
      y[(t0 + t) * ldy + r + i] = sum;
    }
}

template <class F, int RT>
void rows_fixed(const F& f, int64_t cols, const float* x, int64_t n, float* y, int64_t ldy, int64_t r) {
  int64_t t = 0;
  for (; t + kMaxToks <= n; t += kMaxToks) rows_tile<F, RT, kMaxToks>(f, cols, x, y, ldy, r, t);
  if (t < n) rows_tile<F, RT, 1>(f, cols, x, y, ldy, r, t);
}

template <class F>
void rows(const F& f, int64_t cols, const float* x, int64_t n, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  int64_t r = r0;
  for (; r + kMaxRows <= r1; r += kMaxRows) rows_fixed<F, kMaxRows>(f, cols, x, n, y, ldy, r);
  switch (r1 - r) {
    case 3: rows_fixed<F, 3>(f, cols, x, n, y, ldy, r); break;
    case 2: rows_fixed<F, 2>(f, cols, x, n, y, ldy, r); break;
    case 1: rows_fixed<F, 1>(f, cols, x, n, y, ldy, r); break;
    default: break;
  }
}

}  // namespace

void matmul_rows(const QMatrix& W, const float* x, int64_t n, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  with_decoder(W, [&](const auto& f) { rows(f, W.cols, x, n, y, ldy, r0, r1); });
}

}  // namespace neon

namespace neon {
void matmul_t_cols(const QMatrix& W, const float* x, int64_t n, float* y, int64_t c0, int64_t c1);
float dot(const float* a, const float* b, int64_t n);
void axpy(float alpha, const float* x, float* y, int64_t n);
void quantize_q8_row(const float* x, int64_t cols, int8_t* q, float* d);
void matmul_q8_rows(const QMatrix& W, const Q8Rows& xq, float* y, int64_t ldy, int64_t r0, int64_t r1);
void matmul_q8_rows_smmla(const QMatrix& W, const Q8Rows& xq, float* y, int64_t ldy, int64_t r0, int64_t r1);
void dot_tile(const float* a, int64_t lda, int64_t na, const float* b, int64_t ldb, int64_t nb, int64_t n, float* out,
              int64_t ldo, const float* b_next);
void axpy_tile(const float* p, int64_t ldp, int64_t na, const float* x, int64_t ldx, int64_t nb, float* y, int64_t ldy,
               int64_t n);
void exp_each(const float* x, float* y, int64_t n);
}  // namespace neon

const KernelTable* neon_kernel_table() {
  static constexpr KernelTable table = {neon::matmul_rows,     neon::matmul_t_cols, neon::dot,      neon::axpy,
                                        neon::quantize_q8_row, neon::matmul_q8_rows, neon::dot_tile, neon::axpy_tile,
                                        neon::exp_each};
  return &table;
}

// The same with the INT4 integer-dot product on SMMLA (same bits).
const KernelTable* neon_i8mm_kernel_table() {
  static constexpr KernelTable table = {neon::matmul_rows,     neon::matmul_t_cols,       neon::dot,      neon::axpy,
                                        neon::quantize_q8_row, neon::matmul_q8_rows_smmla, neon::dot_tile, neon::axpy_tile,
                                        neon::exp_each};
  return &table;
}

bool cpu_has_neon() { return true; }  // every arm64 CPU (Advanced SIMD is mandatory in ARMv8-A)

}  // namespace trillion
