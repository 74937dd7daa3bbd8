// The integer-dot compute path (the fast one, --activations int8): each token's activation
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
// same bits), with 8 float lanes acc_0..7 from 0:
//   INT8_G32: for each group g in increasing order, lane k in 0..7:
//     isum_k = sum_{j<4} w_q[32g + 4k + j] * q[32g + 4k + j]        (exact int32)
//     s_g    = float(weight scale of (r, g)) * d_g                  (float32 multiply)
//     acc_k  = fma(float(isum_k), s_g, acc_k)                       (float32, one rounding)
//   INT4_G32: for each pair p of groups (2p, 2p + 1) in increasing order,
//     lane k in 0..7 belongs to group g = 2p + k/4 and sums its 8 columns
//     c = 32g + 8(k%4) .. + 7:
//     isum_k = sum_{j<8} w_q[c + j] * q[c + j]                      (exact int32)
//     acc_k  = fma(float(isum_k), s_g, acc_k)                       (s_g as above)
//     (when the group count is odd, the last pair's lanes 4..7 are left as they are).
//   y = ((acc_0 + acc_4) + (acc_2 + acc_6)) + ((acc_1 + acc_5) + (acc_3 + acc_7))
// w_q is the int8 q of INT8_G32 or the nibble - 8 of INT4_G32. INT4's lanes
// are 8 columns because its stored bytes hold columns 2i and 2i + 1: masking
// and shifting a group's 16 bytes yields its even and its odd columns, whose
// products with the even and odd activations (Q8Rows' pair layout) add to
// exactly those lanes, with no shuffle back to column order (AVX2: 2 groups
// per 256-bit load; NEON: SDOT's 4 lanes per group).
#pragma once
#include <cstdint>
#include <vector>

#include "common/thread_pool.hpp"
#include "kernels/qmatrix.hpp"

namespace trillion {

inline constexpr int64_t kQ8Group = 32;

// One token's group pair p (2p, 2p + 1) in the order INT4_G32 kernels read
// it (q8_pair_layout; a missing last group reads as zeros): 128 bytes, so
// one pointer and fixed offsets reach all four parts.
struct alignas(32) Q8Pair {
  int8_t e[32];   // the even columns of group 2p (16 bytes), then those of 2p + 1
  int8_t o[32];   // the odd columns likewise
  int32_t c[8];   // 8 * the sum of q over lane k's 8 columns (for kernels that
                  // multiply the stored nibble w + 8 and subtract it: the same sum)
  float d[8];     // d_2p four times, then d_2p+1 four times (lane k's d)
};
static_assert(sizeof(Q8Pair) == 128);

// Quantized activation rows: q [n, groups * 32] (row stride padded to whole
// groups, padding 0) and d [n, groups]. For INT4 weights also the pair
// layout: pair [n, pairs], pairs = ceil(groups / 2).
struct Q8Rows {
  int64_t n = 0, cols = 0, groups = 0;
  std::vector<int8_t> q;
  std::vector<float> d;
  int64_t pairs = 0;  // 0 until q8_pair_layout fills `pair`
  std::vector<Q8Pair> pair;
  const int8_t* row_q(int64_t t) const { return q.data() + t * groups * kQ8Group; }
  const float* row_d(int64_t t) const { return d.data() + t * groups; }
  const Q8Pair* row_pairs(int64_t t) const { return pair.data() + t * pairs; }
};

// Whether the integer path takes this weight format (INT8_G32, INT4_G32).
bool q8_supports(MatFormat f);

// x[n, cols] quantized as above, into `out` (resized); with the pair layout
// when the weights are `for_weights` INT4_G32 (cleared otherwise).
void quantize_q8(const float* x, int64_t n, int64_t cols, Q8Rows& out,
                 MatFormat for_weights = MatFormat::INT8_G32);

// Fills xq's pair layout from its q and d (what INT4_G32 products read).
void q8_pair_layout(Q8Rows& xq);

// out = rows[0..m) of src (q, d and, when src has it, the pair layout):
// quantization is per row, so these are the bits quantize_q8 gives the
// gathered float rows.
void q8_gather(const Q8Rows& src, const int64_t* rows, int64_t m, Q8Rows& out);

// y[n, W.rows] = W . xq (xq.cols == W.cols), output rows split over the pool's threads.
void matmul_q8(const QMatrix& W, const Q8Rows& xq, float* y, ThreadPool& pool);
// ya = A . xq and yb = B . xq in one pool call (the rows of both split over
// the threads as one list): one wait for the slower thread instead of two.
// Each output's bits are matmul_q8's.
void matmul_q8_pair(const QMatrix& A, float* ya, const QMatrix& B, float* yb, const Q8Rows& xq, ThreadPool& pool);

// The same on the calling thread, output row stride ldy >= W.rows (same bits).
void matmul_q8_serial(const QMatrix& W, const Q8Rows& xq, float* y, int64_t ldy);

// The scalar twins the tests compare every ISA with (same bits by definition).
void quantize_q8_ref(const float* x, int64_t n, int64_t cols, Q8Rows& out,
                     MatFormat for_weights = MatFormat::INT8_G32);
void matmul_q8_ref(const QMatrix& W, const Q8Rows& xq, float* y);

}  // namespace trillion
