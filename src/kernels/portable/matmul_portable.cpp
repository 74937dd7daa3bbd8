// Portable matmul kernels: plain C++ with explicit 8-lane accumulators, so the
// reduction blocking is fixed by the source, not by the compiler (no
// reassociation is needed to vectorize it). The fallback on every target.
//
// matmul, per output element: lane j accumulates columns c = 8k + j of each
// scale group (128 FP8, 32 INT4, the whole row otherwise); a group's lanes are
// added to the total lanes times the group scale; the 8 total lanes are summed
// in a fixed tree; columns past the last multiple of 8 are summed in order and
// added last. matmul_t, per output element: sum over r in order of
// (x[r] * scale) * stored value.
#include <algorithm>

#include "kernels/decode_scalar.hpp"
#include "kernels/kernel_table.hpp"

namespace trillion {
namespace {

using detail::group_scale;
using detail::stored_value;

constexpr int kLanes = 8;
constexpr int64_t kTokTile = 4;  // tokens sharing one decode of a weight chunk

float sum_lanes(const float* a) { return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7])); }

// y[t*ldy + r] for tokens [t0, t0 + tt) of one row r.
template <MatFormat F>
void row_tile(const QMatrix& W, const float* x, int64_t t0, int64_t tt, int64_t r, float* y, int64_t ldy) {
  const int64_t cols = W.cols;
  const int64_t gw = detail::group_width(F) ? detail::group_width(F) : std::max<int64_t>(cols, 1);
  float tot[kTokTile][kLanes] = {};
  float tail[kTokTile] = {};
  for (int64_t c0 = 0; c0 < cols; c0 += gw) {
    const int64_t c1 = std::min(cols, c0 + gw), cv = c0 + ((c1 - c0) & ~int64_t(7));
    float blk[kTokTile][kLanes] = {};
    for (int64_t c = c0; c < cv; c += kLanes) {
      float w[kLanes];
      for (int j = 0; j < kLanes; ++j) w[j] = stored_value<F>(W, r, c + j);
      for (int64_t t = 0; t < tt; ++t) {
        const float* xr = x + (t0 + t) * cols + c;
        for (int j = 0; j < kLanes; ++j) blk[t][j] += w[j] * xr[j];
      }
    }
    const float s = group_scale<F>(W, r, c0);
    for (int64_t t = 0; t < tt; ++t) {
      for (int j = 0; j < kLanes; ++j) tot[t][j] += blk[t][j] * s;
      if (cv == c1) continue;  // only the last group can have a tail
      float ts = 0.0f;
      for (int64_t c = cv; c < c1; ++c) ts += stored_value<F>(W, r, c) * x[(t0 + t) * cols + c];
      tail[t] = ts * s;
    }
  }
  for (int64_t t = 0; t < tt; ++t) y[(t0 + t) * ldy + r] = sum_lanes(tot[t]) + tail[t];
}

// y[t][c, c + width) for tokens [t0, t0 + tt); width <= 8, one scale group.
template <MatFormat F>
void col_tile(const QMatrix& W, const float* x, int64_t t0, int64_t tt, int64_t c, int64_t width, float* y) {
  float acc[kTokTile][kLanes] = {};
  for (int64_t r = 0; r < W.rows; ++r) {
    float w[kLanes] = {};
    for (int64_t j = 0; j < width; ++j) w[j] = stored_value<F>(W, r, c + j);
    const float s = group_scale<F>(W, r, c);
    for (int64_t t = 0; t < tt; ++t) {
      const float xs = x[(t0 + t) * W.rows + r] * s;
      for (int j = 0; j < kLanes; ++j) acc[t][j] += xs * w[j];
    }
  }
  for (int64_t t = 0; t < tt; ++t)
    for (int64_t j = 0; j < width; ++j) y[(t0 + t) * W.cols + c + j] = acc[t][j];
}

}  // namespace

void portable_matmul_rows(const QMatrix& W, const float* x, int64_t n, float* y, int64_t ldy, int64_t r0,
                          int64_t r1) {
  detail::with_format(W.format, [&]<MatFormat F>() {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t t = 0; t < n; t += kTokTile) row_tile<F>(W, x, t, std::min(kTokTile, n - t), r, y, ldy);
  });
}

void portable_matmul_t_cols(const QMatrix& W, const float* x, int64_t n, float* y, int64_t c0, int64_t c1) {
  detail::with_format(W.format, [&]<MatFormat F>() {
    for (int64_t t = 0; t < n; t += kTokTile) {
      const int64_t tt = std::min(kTokTile, n - t);
      for (int64_t c = c0; c < c1; c += kLanes) col_tile<F>(W, x, t, tt, c, std::min<int64_t>(kLanes, c1 - c), y);
    }
  });
}

}  // namespace trillion
