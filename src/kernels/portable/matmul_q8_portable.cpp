// Portable integer-dot kernels: the definition in matmul_q8.hpp written out
// as scalar code (it is also the reference every ISA is compared with). The
// lane sums are exact integers, so only the float steps below fix the bits:
// the group scale product, one fma per lane and group, the fixed final tree.
// It reads the activations in column order (q, d), not INT4's pair layout,
// so the ISA kernels' pair reads are checked against the definition.
#include <algorithm>
#include <cmath>

#include "kernels/decode_scalar.hpp"
#include "kernels/kernel_table.hpp"
#include "kernels/matmul_q8.hpp"
#include "kernels/q8_scalar.hpp"

namespace trillion {
namespace {

constexpr int64_t kTokTile = 4;  // tokens sharing one pass over a weight row

// The int8 weights of row r, group g: w[32], 0 past the row's end.
template <MatFormat F>
void group_weights(const QMatrix& W, int64_t r, int64_t g, int32_t* w) {
  for (int64_t j = 0; j < kQ8Group; ++j) {
    const int64_t c = g * kQ8Group + j;
    w[j] = c < W.cols ? int32_t(detail::stored_value<F>(W, r, c)) : 0;
  }
}

template <MatFormat F>
void row_tokens(const QMatrix& W, const Q8Rows& xq, int64_t r, int64_t t0, int64_t tt, float* y, int64_t ldy) {
  float acc[kTokTile][8] = {};
  int32_t w[kQ8Group];
  for (int64_t g = 0; g < xq.groups; ++g) {
    group_weights<F>(W, r, g, w);
    const float ws = detail::group_scale<F>(W, r, g * kQ8Group);
    for (int64_t t = 0; t < tt; ++t) {
      const int8_t* q = xq.row_q(t0 + t) + g * kQ8Group;
      const float s = ws * xq.row_d(t0 + t)[g];
      if constexpr (F == MatFormat::INT8_G32) {
        for (int k = 0; k < 8; ++k) {  // lane k: columns 4k..4k+3
          int32_t isum = 0;
          for (int j = 0; j < 4; ++j) isum += w[4 * k + j] * int32_t(q[4 * k + j]);
          acc[t][k] = std::fma(float(isum), s, acc[t][k]);
        }
      } else {
        for (int j = 0; j < 4; ++j) {  // lane 4 (g % 2) + j: columns 8j..8j+7
          int32_t isum = 0;
          for (int c = 0; c < 8; ++c) isum += w[8 * j + c] * int32_t(q[8 * j + c]);
          float& a = acc[t][4 * (g % 2) + j];
          a = std::fma(float(isum), s, a);
        }
      }
    }
  }
  for (int64_t t = 0; t < tt; ++t) {
    const float* a = acc[t];
    y[(t0 + t) * ldy + r] = ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
  }
}

}  // namespace

void portable_quantize_q8_row(const float* x, int64_t cols, int8_t* q, float* d) {
  const int64_t groups = (cols + kQ8Group - 1) / kQ8Group;
  for (int64_t g = 0; g < groups; ++g)
    d[g] = quantize_q8_group_scalar(x, g * kQ8Group, std::min(cols, (g + 1) * kQ8Group), q + g * kQ8Group);
}

void portable_matmul_q8_rows(const QMatrix& W, const Q8Rows& xq, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  auto run = [&]<MatFormat F>() {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t t = 0; t < xq.n; t += kTokTile) row_tokens<F>(W, xq, r, t, std::min(kTokTile, xq.n - t), y, ldy);
  };
  if (W.format == MatFormat::INT8_G32) run.template operator()<MatFormat::INT8_G32>();
  else run.template operator()<MatFormat::INT4_G32>();
}

}  // namespace trillion
