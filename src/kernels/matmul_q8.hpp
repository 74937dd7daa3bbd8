// The integer-dot compute path ("fast" in DESIGN): each token's activation
// row quantized to int8 in groups of 32 columns, multiplied with INT8_G32 or
// INT4_G32 weights as exact integer dot products, one float scale multiply
// per group. What llama.cpp (q8_0 activations) and DeepSeek's own FP8
// inference do; the float32 matmul (matmul.hpp) stays the exact path.
//
// Quantization of a row x[cols], group g = columns [32g, 32g + 32):
//   d_g = absmax_g / 127                        (float32 division)
//   q[c] = round_half_even(x[c] / d_g)          (float32 division; 0 when d_g == 0)
// A group holding a NaN or an infinity gets d_g = NaN (its outputs are NaN).
// Columns past cols (the last group's padding) are 0.
//
// The product, per output y[t][r] (every ISA performs exactly these
// operations, so every ISA, tile, batch size and thread count gives the
// same bits):
//   for each group g in increasing order, lane k in 0..7:
//     isum_k = sum_{j<4} w_q[32g + 4k + j] * q[32g + 4k + j]        (exact int32)
//     s_g    = float(weight scale of (r, g)) * d_g                  (float32 multiply)
//     acc_k  = fma(float(isum_k), s_g, acc_k)                       (float32, one rounding)
//   y = ((acc_0 + acc_4) + (acc_2 + acc_6)) + ((acc_1 + acc_5) + (acc_3 + acc_7))
// w_q is the int8 q of INT8_G32 or the nibble - 8 of INT4_G32.
#pragma once
#include <cstdint>
#include <vector>

#include "common/thread_pool.hpp"
#include "kernels/qmatrix.hpp"

namespace trillion {

inline constexpr int64_t kQ8Group = 32;

// Quantized activation rows: q [n, groups * 32] (row stride padded to whole
// groups, padding 0) and d [n, groups].
struct Q8Rows {
  int64_t n = 0, cols = 0, groups = 0;
  std::vector<int8_t> q;
  std::vector<float> d;
  const int8_t* row_q(int64_t t) const { return q.data() + t * groups * kQ8Group; }
  const float* row_d(int64_t t) const { return d.data() + t * groups; }
};

// Whether the integer path takes this weight format (INT8_G32, INT4_G32).
bool q8_supports(MatFormat f);

// x[n, cols] quantized as above, into `out` (resized).
void quantize_q8(const float* x, int64_t n, int64_t cols, Q8Rows& out);

// y[n, W.rows] = W . xq (xq.cols == W.cols), output rows split over the pool's threads.
void matmul_q8(const QMatrix& W, const Q8Rows& xq, float* y, ThreadPool& pool);

// The same on the calling thread, output row stride ldy >= W.rows (same bits).
void matmul_q8_serial(const QMatrix& W, const Q8Rows& xq, float* y, int64_t ldy);

// The scalar twins the tests compare every ISA with (same bits by definition).
void quantize_q8_ref(const float* x, int64_t n, int64_t cols, Q8Rows& out);
void matmul_q8_ref(const QMatrix& W, const Q8Rows& xq, float* y);

}  // namespace trillion
