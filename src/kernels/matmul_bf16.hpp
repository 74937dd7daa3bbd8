// The bf16 compute path for FP8_B128 weights, read in place (no second copy
// of the weights): --activations bf16 (config/activations.hpp, run by
// model/linear.cpp; docs/kernels.md, "FP8 on bf16 dot products").
//
// Two definitions, one per ISA family, because the two families' bf16 dot
// instructions round differently; a build runs its family's definition on
// every CPU (native where the instructions exist, in scalar code elsewhere),
// so every machine of a family gives the same bits for any tile, batch size
// and thread count. Common to both:
//   x'[c]    = bf16(x[c]): round to nearest even; a subnormal x, or a result
//              below the smallest normal in magnitude, is a zero of x's sign;
//              NaN stays NaN
//   w'[r][c] = e4m3(w[r][c]), exactly (every e4m3 value is a bf16: the
//              weights are not rounded); the NaN codes 0x7F and 0xFF read
//              as +-480, as the f32 path reads them (kernels/format_fields
//              .hpp: checkpoints hold no NaN)
//   per output y[t][r], for each 128-column block b in increasing order,
//   with s_b the scale of row r's 128 x 128 block, a block sum a_b (below)
//   is scaled into the totals with one IEEE fma (nothing flushed); columns
//   past cols are 0, up to the next multiple of 32.
//
// x86 family (every build but arm64): 16 float lanes acc_l from 0. Per
//   block: 16 lanes a_l from 0; for each of the block's 32-column chunks j in
//   increasing order, lane l takes the pair of columns e = 32j + 2l and
//   o = e + 1:
//     a_l = ftz(fma(w'[o], x'[o], a_l));  a_l = ftz(fma(w'[e], x'[e], a_l))
//   (ftz: a result below the smallest normal becomes a zero of its sign);
//   then acc_l = fma(s_b, a_l, acc_l). Last, y = the tree (l, l + 8),
//   (l, l + 4), (l, l + 2), (l, l + 1): lane 0's sum. The inner step is what
//   AVX-512 BF16's vdpbf16ps does to 16 float lanes of 32 bf16 pairs (odd
//   pair first, each step rounded, tininess after rounding, denormals
//   flushed: measured bit for bit by tests/kernels/test_matmul_bf16.cpp).
//
// Arm family (arm64 builds): one total acc from 0. Per block: 4 lanes a_q
//   from 0; for each of the block's 4-column quads j in increasing order
//   (columns c = b + 4j .. c + 3), lane q = j mod 4 takes two steps
//     a_q = step(a_q, c, c + 1);  a_q = step(a_q, c + 2, c + 3)
//   where step is arm_bf16::step (kernels/bf16_arm_step.hpp: Arm's BFDOT /
//   BFMMLA without FEAT_EBF16, products, pair sum and accumulation each
//   rounded to odd, denormals flushed before rounding); then
//   acc = fma(s_b, (a_0 + a_1) + (a_2 + a_3), acc) (IEEE). y = acc. The
//   quads and their two chained steps are BFMMLA's per output (2 rows x 2
//   tokens an instruction); the 4 lanes let a kernel keep 4 independent
//   chains per output in flight.
//
// The block scale is applied to each block's partial sums, as DeepSeek's
// own FP8 GEMM applies it, not to the weights: the weights enter exactly
// (the only rounding of the x86 definition's products is the activations';
// Arm's steps add rounding to odd), and turning an e4m3 byte into a bf16 is
// bit placement, with no multiply and no rounding per weight.
#pragma once
#include <cstdint>
#include <vector>

#include "common/thread_pool.hpp"
#include "kernels/qmatrix.hpp"

namespace trillion {

inline constexpr int64_t kBf16Chunk = 32;   // columns per step of 16 lanes
inline constexpr int64_t kBf16Block = 128;  // columns per FP8 scale block

enum class Bf16Family : uint8_t { x86, arm };
// The definition this build runs.
#if defined(__aarch64__)
inline constexpr Bf16Family kBf16Family = Bf16Family::arm;
#else
inline constexpr Bf16Family kBf16Family = Bf16Family::x86;
#endif
const char* to_string(Bf16Family f);
// A test seam: the family matmul_bf16 runs from now on (default: the
// build's), the other one in scalar code. tests/model/hf_logits takes it so
// that the reference tests hold the Arm definition to the float64 reference
// at model level on x86 machines, which run no arm64 model tests.
void set_bf16_family(Bf16Family f);
Bf16Family bf16_family();

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
// runs it natively (x86: AVX-512 BF16; arm64: FEAT_BF16); elsewhere
// matmul_bf16 runs the build's definition in scalar code (correct, slow).
bool bf16_supports(MatFormat f);
bool bf16_native();
// Whether this path is expected to beat the f32 path on this CPU (what
// --activations auto asks when an FP8 model's int8 copy does not fit): arm64
// with FEAT_BF16 (BFMMLA). False on x86, where vdpbf16ps measured slower than
// the f32 path (docs/kernels.md), and wherever the path is not native.
bool bf16_auto_faster();

// y[n, W.rows] = W . xb (xb.cols == W.cols), output rows split over the pool's threads.
void matmul_bf16(const QMatrix& W, const Bf16Rows& xb, float* y, ThreadPool& pool);
// The same on the calling thread, output row stride ldy (same bits).
void matmul_bf16_serial(const QMatrix& W, const Bf16Rows& xb, float* y, int64_t ldy);
// One BFMMLA (arm64 builds with FEAT_BF16; throws elsewhere): d[2i + j] +=
// n[4i .. 4i + 3] . m[4j .. 4j + 3] as the instruction rounds it. For the
// tests that hold the instruction to arm_bf16::step.
void bfmmla_once(const uint16_t n[8], const uint16_t m[8], float d[4]);

// A definition in scalar code, the one the tests compare each kernel with
// (either family on any build: the tests check both).
void matmul_bf16_ref(const QMatrix& W, const Bf16Rows& xb, float* y, Bf16Family family = kBf16Family);

}  // namespace trillion
