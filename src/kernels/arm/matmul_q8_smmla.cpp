// NEON integer-dot product with SMMLA (FEAT_I8MM: Apple M2 and later,
// Neoverse V1 / N2 / V2, Graviton 3 and 4) for INT4_G32 weights: two rows by
// two tokens per instruction. The only file built with +i8mm; runs only after
// the CPU reports it (matmul_q8_neon.cpp). INT8 weights, one token, a lone
// last token or row, and calls over few rows take the SDOT tiles: same bits.
//
// SMMLA r += A . B^T of two 2x8 int8 operands: r[2i + j] += sum_k a[8i + k] b[8j + k].
// INT4's definition lane m of group g is the exact sum over the 8 columns
// 32g + 8m .. + 7 (matmul_q8.hpp); the SDOT tile reads them as the 4 even
// columns (low nibbles) and the 4 odd ones (high nibbles). With A's row i the
// 8 values of row r + i's lane m in that order and B's row j those of token
// t + j, one SMMLA gives lane m of all four (row, token) outputs. So the
// accumulators are kept per lane, each float32x4 holding the 2x2 outputs, the
// scale s = ws_i * d_j is one vector shared by the four lanes, and the end
// adds the lanes in hsum's order, element by element: the SDOT tile's
// operations on the same values, so its bits.
//
// Why the token operands are laid out once per call (TokenPairGroup): built
// inside the tile, B would cost 12 instructions per token pair and group,
// about what the SMMLAs save. The weights are read as stored (no repacking at
// load, no second copy of the experts).
//
// Instructions per group in the inner loops (GCC 12 -O3, counted in the
// cross build's disassembly; tools/test-arm64.sh builds it): SMMLA 2 rows x
// 4 tokens 72 for 8 outputs (9.0 an output; 2 x 2 tokens 45.5, 11.4), SDOT
// 4 rows x 2 tokens 106.5 (13.3). The layout costs 65 per token pair and
// group, spread over the call's row pairs (36 each): calls over fewer than
// kMinRows rows stay on SDOT (the break-even is about 8). Not timed: no CPU
// with i8mm on this project's test machines (qemu checks the bits only);
// TRILLION_ISA=neon against neon-i8mm with bench_matmul or bench_model
// compares them on one.
#include <vector>

#include "kernels/arm/q8_neon_tile.hpp"

namespace trillion::neon {
namespace {

constexpr int64_t kMinRows = 16;

// Token pair (2u, 2u + 1), group g: SMMLA's B for each lane, and the d of the
// two tokens in the accumulators' order.
struct alignas(16) TokenPairGroup {
  int8_t b[4][16];   // lane m: token 2u's 4 even then 4 odd columns, then token 2u + 1's
  int32_t c[4][4];   // lane m: -8 sum(q) of its 8 columns for tokens 2u, 2u + 1, 2u, 2u + 1
  float d[4];        // d_g of tokens 2u, 2u + 1, 2u, 2u + 1
};

// The layout of every token pair of xq (from its pair layout), group-major
// within a pair: [u * groups + g]. A lone last token is not laid out.
void lay_out(const Q8Rows& xq, std::vector<TokenPairGroup>& out) {
  const int64_t pairs = xq.n / 2;
  out.resize(size_t(pairs * xq.groups));
  for (int64_t u = 0; u < pairs; ++u)
    for (int64_t g = 0; g < xq.groups; ++g) {
      const int64_t p = g / 2, h = g % 2;
      const Q8Pair& a = xq.row_pairs(2 * u)[p];
      const Q8Pair& b = xq.row_pairs(2 * u + 1)[p];
      // zip1 of a token's 4-byte even and odd chunks: its lanes 0 and 1 (8 bytes each); zip2: lanes 2 and 3.
      const int32x4_t ae = vreinterpretq_s32_s8(vld1q_s8(a.e + 16 * h)), ao = vreinterpretq_s32_s8(vld1q_s8(a.o + 16 * h));
      const int32x4_t be = vreinterpretq_s32_s8(vld1q_s8(b.e + 16 * h)), bo = vreinterpretq_s32_s8(vld1q_s8(b.o + 16 * h));
      const int64x2_t a01 = vreinterpretq_s64_s32(vzip1q_s32(ae, ao)), a23 = vreinterpretq_s64_s32(vzip2q_s32(ae, ao));
      const int64x2_t b01 = vreinterpretq_s64_s32(vzip1q_s32(be, bo)), b23 = vreinterpretq_s64_s32(vzip2q_s32(be, bo));
      TokenPairGroup& o = out[size_t(u * xq.groups + g)];
      vst1q_s8(o.b[0], vreinterpretq_s8_s64(vzip1q_s64(a01, b01)));
      vst1q_s8(o.b[1], vreinterpretq_s8_s64(vzip2q_s64(a01, b01)));
      vst1q_s8(o.b[2], vreinterpretq_s8_s64(vzip1q_s64(a23, b23)));
      vst1q_s8(o.b[3], vreinterpretq_s8_s64(vzip2q_s64(a23, b23)));
      for (int m = 0; m < 4; ++m) {
        o.c[m][0] = o.c[m][2] = -a.c[4 * h + m];
        o.c[m][1] = o.c[m][3] = -b.c[4 * h + m];
      }
      const float da = xq.row_d(2 * u)[g], db = xq.row_d(2 * u + 1)[g];
      o.d[0] = o.d[2] = da;
      o.d[1] = o.d[3] = db;
    }
}

// Rows r, r + 1 times token pairs [u, u + TP): every group, then the outputs.
template <int TP>
void tile(const QMatrix& W, const Q8Rows& xq, const TokenPairGroup* tokens, int64_t r, int64_t u, float* y,
          int64_t ldy) {
  const uint8_t* w0 = static_cast<const uint8_t*>(W.data) + r * (W.cols / 2);
  const uint8_t* w1 = w0 + W.cols / 2;
  const uint16_t* s0 = static_cast<const uint16_t*>(W.scale) + r * W.scale_cols;
  const uint16_t* s1 = s0 + W.scale_cols;
  const int64_t groups = xq.groups;
  float32x4_t acc[TP][2][4];  // [token pair][g % 2][lane]: the outputs (r + i, 2(u + tp) + j) at 2i + j
  for (int tp = 0; tp < TP; ++tp)
    for (int h = 0; h < 2; ++h)
      for (int m = 0; m < 4; ++m) acc[tp][h][m] = vdupq_n_f32(0.0f);
  // Group g into the accumulators of g % 2 == H (a constant, so they stay in registers).
  auto step = [&]<int H>(int64_t g) {
    // The stored nibbles w + 8, masked and shifted: the even and odd columns.
    // Each sum starts from -8 sum(q), as in the SDOT tile.
    const uint8x16_t b0 = vld1q_u8(w0 + 16 * g), b1 = vld1q_u8(w1 + 16 * g);
    const int8x16_t e0 = vreinterpretq_s8_u8(vandq_u8(b0, vdupq_n_u8(0x0F)));
    const int8x16_t o0 = vreinterpretq_s8_u8(vshrq_n_u8(b0, 4));
    const int8x16_t e1 = vreinterpretq_s8_u8(vandq_u8(b1, vdupq_n_u8(0x0F)));
    const int8x16_t o1 = vreinterpretq_s8_u8(vshrq_n_u8(b1, 4));
    const int64x2_t r0_01 = vreinterpretq_s64_s32(vzip1q_s32(vreinterpretq_s32_s8(e0), vreinterpretq_s32_s8(o0)));
    const int64x2_t r0_23 = vreinterpretq_s64_s32(vzip2q_s32(vreinterpretq_s32_s8(e0), vreinterpretq_s32_s8(o0)));
    const int64x2_t r1_01 = vreinterpretq_s64_s32(vzip1q_s32(vreinterpretq_s32_s8(e1), vreinterpretq_s32_s8(o1)));
    const int64x2_t r1_23 = vreinterpretq_s64_s32(vzip2q_s32(vreinterpretq_s32_s8(e1), vreinterpretq_s32_s8(o1)));
    const int8x16_t a[4] = {vreinterpretq_s8_s64(vzip1q_s64(r0_01, r1_01)), vreinterpretq_s8_s64(vzip2q_s64(r0_01, r1_01)),
                            vreinterpretq_s8_s64(vzip1q_s64(r0_23, r1_23)), vreinterpretq_s8_s64(vzip2q_s64(r0_23, r1_23))};
    const float32x4_t ws = vcombine_f32(vdup_n_f32(bf16_value(s0[g])), vdup_n_f32(bf16_value(s1[g])));
    for (int tp = 0; tp < TP; ++tp) {
      const TokenPairGroup& t = tokens[(u + tp) * groups + g];
      const float32x4_t s = vmulq_f32(ws, vld1q_f32(t.d));  // ws_i * d_j, the definition's float32 product
      for (int m = 0; m < 4; ++m) {
        const int32x4_t isum = vmmlaq_s32(vld1q_s32(t.c[m]), a[m], vld1q_s8(t.b[m]));
        acc[tp][H][m] = vfmaq_f32(acc[tp][H][m], vcvtq_f32_s32(isum), s);
      }
    }
  };
  int64_t g = 0;
  for (; g + 2 <= groups; g += 2) {
    step.template operator()<0>(g);
    step.template operator()<1>(g + 1);
  }
  if (g < groups) step.template operator()<0>(g);
  for (int tp = 0; tp < TP; ++tp) {
    // Lane k of the definition is acc[k / 4][k % 4]: ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)).
    const float32x4_t v0 = vaddq_f32(acc[tp][0][0], acc[tp][1][0]), v1 = vaddq_f32(acc[tp][0][1], acc[tp][1][1]);
    const float32x4_t v2 = vaddq_f32(acc[tp][0][2], acc[tp][1][2]), v3 = vaddq_f32(acc[tp][0][3], acc[tp][1][3]);
    float out[4];
    vst1q_f32(out, vaddq_f32(vaddq_f32(v0, v2), vaddq_f32(v1, v3)));
    const int64_t t0 = 2 * (u + tp);
    y[t0 * ldy + r] = out[0];
    y[(t0 + 1) * ldy + r] = out[1];
    y[t0 * ldy + r + 1] = out[2];
    y[(t0 + 1) * ldy + r + 1] = out[3];
  }
}

void int4_rows(const QMatrix& W, const Q8Rows& xq, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  thread_local std::vector<TokenPairGroup> tokens;  // grows to the largest call; one per pool thread
  lay_out(xq, tokens);
  const int64_t pairs = xq.n / 2;
  int64_t r = r0;
  for (; r + 2 <= r1; r += 2) {
    int64_t u = 0;
    for (; u + 2 <= pairs; u += 2) tile<2>(W, xq, tokens.data(), r, u, y, ldy);
    if (u < pairs) tile<1>(W, xq, tokens.data(), r, u, y, ldy);
    if (xq.n % 2) int4_tile<SdotSum, 2, 1>(W, xq, r, xq.n - 1, y, ldy);
  }
  if (r < r1) rows_q8<SdotSum, MatFormat::INT4_G32>(W, xq, y, ldy, r, r1);
}

}  // namespace

void matmul_q8_rows_smmla(const QMatrix& W, const Q8Rows& xq, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  if (W.format == MatFormat::INT4_G32 && xq.n >= 2 && r1 - r0 >= kMinRows) int4_rows(W, xq, y, ldy, r0, r1);
  else matmul_q8_rows_with<SdotSum>(W, xq, y, ldy, r0, r1);
}

}  // namespace trillion::neon
