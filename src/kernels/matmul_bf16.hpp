// The bf16 compute path for FP8_B128 weights, read in place (no second copy
// of the weights): --activations bf16 (config/activations.hpp, run by
// model/linear.cpp; docs/kernels.md, "FP8 on bf16 dot products").
//
// Definition (every ISA performs exactly these operations, so every tile,
// batch size and thread count gives the same bits):
//   x'[c]    = bf16(x[c])                              (round to nearest even)
//   w'[r][c] = bf16(float(e4m3(w[r][c]) * s))          (s: the 128x128 block's
//              scale; the float32 product rounded to nearest even, then to bf16)
//   bf16(v): round to nearest even; a result below the smallest normal in
//   magnitude, or a subnormal v, is a zero of v's sign; NaN stays NaN
//   (e4m3's 0x7F and 0xFF are NaN).
//   Per output y[t][r], 16 float lanes acc_l from 0; for each 32-column chunk
//   j in increasing order (columns past cols are 0), lane l takes the pair of
//   columns e = 32j + 2l and o = e + 1:
//     acc_l = ftz(fma(w'[o], x'[o], acc_l));  acc_l = ftz(fma(w'[e], x'[e], acc_l))
//   (each product of two bf16 is exact in float32; ftz: a result below the
//   smallest normal becomes a zero of its sign), then
//   y = the tree (l, l + 8), (l, l + 4), (l, l + 2), (l, l + 1): lane 0's sum.
// That lane is what AVX-512 BF16's vdpbf16ps does to 16 float lanes of 32
// bf16 pairs (odd pair first, each step rounded, denormals flushed, measured
// bit for bit by tests/kernels/test_matmul_bf16.cpp); and vcvtne2ps2bf16
// rounds as bf16() above. Folding the block scale into w' costs the weights
// one more rounding (float32, then bf16) but no per-block accumulators: one
// chain per output over the whole row.
#pragma once
#include <cstdint>
#include <vector>

#include "common/thread_pool.hpp"
#include "kernels/qmatrix.hpp"

namespace trillion {

inline constexpr int64_t kBf16Chunk = 32;

// Activation rows rounded to bf16 (x' above): [n][stride], stride = cols
// rounded up to whole chunks, padding 0.
struct Bf16Rows {
  int64_t n = 0, cols = 0, stride = 0;
  std::vector<uint16_t> v;
  const uint16_t* row(int64_t t) const { return v.data() + t * stride; }
};

// bf16() of the definition, for one float.
uint16_t bf16_round(float v);
// w' of the definition: e4m3 byte `w` in a block of scale `s`.
uint16_t bf16_weight(uint8_t w, float s);

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
