// The bf16 compute path for FP8_B128 weights, read in place (no second copy
// of the weights): --activations bf16 (config/activations.hpp, run by
// model/linear.cpp; docs/kernels.md, "FP8 on bf16 dot products").
//
// Definition (every ISA performs exactly these operations, so every tile,
// batch size and thread count gives the same bits):
//   x'[c]    = bf16(x[c]): round to nearest even; a subnormal x, or a result
//              below the smallest normal in magnitude, is a zero of x's sign;
//              NaN stays NaN
//   w'[r][c] = e4m3(w[r][c]), exactly (every e4m3 value is a bf16: the
//              weights are not rounded); the NaN codes 0x7F and 0xFF read
//              as +-480, as the f32 path reads them (kernels/format_fields
//              .hpp: checkpoints hold no NaN)
//   Per output y[t][r], 16 float lanes acc_l from 0. For each 128-column
//   block b in increasing order, with s_b the scale of row r's 128 x 128
//   block: 16 lanes a_l from 0; for each of the block's 32-column chunks j
//   in increasing order (columns past cols are 0), lane l takes the pair of
//   columns e = 32j + 2l and o = e + 1:
//     a_l = ftz(fma(w'[o], x'[o], a_l));  a_l = ftz(fma(w'[e], x'[e], a_l))
//   (ftz: a result below the smallest normal becomes a zero of its sign);
//   then acc_l = fma(s_b, a_l, acc_l) (IEEE: nothing flushed). Last,
//   y = the tree (l, l + 8), (l, l + 4), (l, l + 2), (l, l + 1): lane 0's sum.
// The inner step is what AVX-512 BF16's vdpbf16ps does to 16 float lanes of
// 32 bf16 pairs (odd pair first, each step rounded, tininess after rounding,
// denormals flushed: measured bit for bit by tests/kernels/test_matmul_bf16
// .cpp). The block scale is applied to each block's partial sums, as
// DeepSeek's own FP8 GEMM applies it, not to the weights: the weights enter
// exactly (the one rounding of the path is the activations'), and turning
// an e4m3 byte into a bf16 is bit placement, with no multiply and no
// rounding per weight.
#pragma once
#include <cstdint>
#include <vector>

#include "common/thread_pool.hpp"
#include "kernels/qmatrix.hpp"

namespace trillion {

inline constexpr int64_t kBf16Chunk = 32;   // columns per step of 16 lanes
inline constexpr int64_t kBf16Block = 128;  // columns per FP8 scale block

// Activation rows rounded to bf16 (x' above): [n][stride], stride = cols
// rounded up to whole chunks, padding 0.
struct Bf16Rows {
  int64_t n = 0, cols = 0, stride = 0;
  std::vector<uint16_t> v;
  const uint16_t* row(int64_t t) const { return v.data() + t * stride; }
};

// bf16() of the definition, for one float.
uint16_t bf16_round(float v);
// w' of the definition: the bf16 of e4m3 byte `w` (exact; +-480 for 0x7F, 0xFF).
uint16_t bf16_weight(uint8_t w);

void round_bf16_rows(const float* x, int64_t n, int64_t cols, Bf16Rows& out);

// Whether this path takes the weight format (FP8_B128) and whether this CPU
// runs it natively (AVX-512 BF16); elsewhere matmul_bf16 runs the portable
// definition (correct, slow).
bool bf16_supports(MatFormat f);
bool bf16_native();

// y[n, W.rows] = W . xb (xb.cols == W.cols), output rows split over the pool's threads.
void matmul_bf16(const QMatrix& W, const Bf16Rows& xb, float* y, ThreadPool& pool);
// The same on the calling thread, output row stride ldy (same bits).
void matmul_bf16_serial(const QMatrix& W, const Bf16Rows& xb, float* y, int64_t ldy);
// The scalar definition the tests compare every kernel with.
void matmul_bf16_ref(const QMatrix& W, const Bf16Rows& xb, float* y);

}  // namespace trillion
