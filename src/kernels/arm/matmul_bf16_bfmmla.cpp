// The bf16 path's Arm definition (kernels/matmul_bf16.hpp) on BFMMLA
// (FEAT_BF16: Apple M2 and later, Neoverse V1/N2 and later). Built with that
// flag; runs only after the CPU reports the feature (bf16_native()).
//
// Tile: 4 weight rows x 4 tokens, as 2 row pairs x 2 token pairs, one
// BFMMLA per pair of pairs and quad (2 x 2 outputs, 4 columns each). The
// definition's 4 lanes per output are 4 accumulators per pair of pairs (16
// independent chains in flight). A 4-row panel of the weights is widened to
// bf16 once, into BFMMLA's operand order (row pair, quad: 4 columns of one
// row, then 4 of the other), and read by every token group; the activations
// are packed once per call the same way (token pair, quad).
#include <arm_neon.h>

#include <algorithm>
#include <vector>

#include "kernels/matmul_bf16.hpp"

namespace trillion {

namespace {

inline bfloat16x8_t load_bf16(const uint16_t* p) { return vreinterpretq_bf16_u16(vld1q_u16(p)); }

// w' of 8 e4m3 bytes, exactly: the byte as fp16 bits of w x 2^-8 (sign
// extended, shifted, bit 14 cleared: the f32 path's decode, subnormals
// included), widened to f32 (exact), times 2^8 (exact), and each float's
// upper half (exact: 4 significant bits). 9 instructions for 8 weights in
// the source; the panel loop around it compiles to 20 (2.5 a weight,
// bench/neon_loop_counts.py), where a table read cost ~10 a weight.
inline uint16x8_t widen_half(int8x8_t bytes) {
  const int16x8_t b = vmovl_s8(bytes);
  const uint16x8_t h = vandq_u16(vshlq_n_u16(vreinterpretq_u16_s16(b), 7), vdupq_n_u16(0xBFFF));
  const float32x4_t lo = vmulq_n_f32(vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(h))), 256.0f);
  const float32x4_t hi = vmulq_n_f32(vcvt_high_f32_f16(vreinterpretq_f16_u16(h)), 256.0f);
  return vuzp2q_u16(vreinterpretq_u16_f32(lo), vreinterpretq_u16_f32(hi));
}

inline bfloat16x8_t pair_quads(uint16x8_t a, uint16x8_t b, bool upper) {
  const uint64x2_t a64 = vreinterpretq_u64_u16(a), b64 = vreinterpretq_u64_u16(b);
  return vreinterpretq_bf16_u64(upper ? vzip2q_u64(a64, b64) : vzip1q_u64(a64, b64));
}

// One token pair (n <= 2, decode): the weights are widened in registers as
// the tile reads them, 4 rows x 16 columns a turn, into the same operands
// the panel holds (a panel written and read again would cost more than the
// products at one token pair).
void rows_one_pair(const QMatrix& W, const uint16_t* xp, int64_t quads, int64_t n, float* y, int64_t ldy,
                   int64_t r0, int64_t r1) {
  const auto* w = static_cast<const uint8_t*>(W.data);
  const auto* sc = static_cast<const float*>(W.scale);
  alignas(16) int8_t tail[4][16];
  for (int64_t r = r0; r < r1; r += 4) {
    const int8_t* src[4];
    int64_t row[4];
    for (int i = 0; i < 4; ++i) {
      row[i] = std::min(r + i, r1 - 1);
      src[i] = reinterpret_cast<const int8_t*>(w + row[i] * W.cols);
    }
    float32x4_t acc[2] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    for (int64_t q0 = 0, block = 0; q0 < quads; q0 += kBf16Block / 4, ++block) {
      const int64_t q1 = std::min(quads, q0 + kBf16Block / 4);
      float32x4_t p[4][2];
      for (auto& lane : p) lane[0] = lane[1] = vdupq_n_f32(0.0f);
      for (int64_t q = q0; q < q1; q += 4) {
        const int64_t c = q * 4;
        uint16x8_t lo[4], hi[4];
        for (int i = 0; i < 4; ++i) {
          const int8_t* at = src[i] + c;
          if (c + 16 > W.cols) {  // the row's last columns, zeros past them (e4m3 0x00 is +0)
            std::fill_n(tail[i], 16, int8_t(0));
            if (c < W.cols) std::copy_n(at, W.cols - c, tail[i]);
            at = tail[i];
          }
          lo[i] = widen_half(vld1_s8(at));
          hi[i] = widen_half(vld1_s8(at + 8));
        }
        const bfloat16x8_t x0 = load_bf16(xp + q * 8), x1 = load_bf16(xp + (q + 1) * 8),
                           x2 = load_bf16(xp + (q + 2) * 8), x3 = load_bf16(xp + (q + 3) * 8);
        for (int rp = 0; rp < 2; ++rp) {
          const int a = 2 * rp, b = a + 1;
          p[0][rp] = vbfmmlaq_f32(p[0][rp], pair_quads(lo[a], lo[b], false), x0);
          p[1][rp] = vbfmmlaq_f32(p[1][rp], pair_quads(lo[a], lo[b], true), x1);
          p[2][rp] = vbfmmlaq_f32(p[2][rp], pair_quads(hi[a], hi[b], false), x2);
          p[3][rp] = vbfmmlaq_f32(p[3][rp], pair_quads(hi[a], hi[b], true), x3);
        }
      }
      for (int rp = 0; rp < 2; ++rp) {
        const float sa = sc[((W.scale_row0 + row[2 * rp]) / 128) * W.scale_cols + block];
        const float sb = sc[((W.scale_row0 + row[2 * rp + 1]) / 128) * W.scale_cols + block];
        const float sv[4] = {sa, sa, sb, sb};
        const float32x4_t sum = vaddq_f32(vaddq_f32(p[0][rp], p[1][rp]), vaddq_f32(p[2][rp], p[3][rp]));
        acc[rp] = vfmaq_f32(acc[rp], sum, vld1q_f32(sv));  // fma(s, sum, acc)
      }
    }
    for (int rp = 0; rp < 2; ++rp) {
      float out[4];
      vst1q_f32(out, acc[rp]);
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j)
          if (r + 2 * rp + i < r1 && j < n) y[j * ldy + r + 2 * rp + i] = out[2 * i + j];
    }
  }
}

// The outputs of token pairs [tp, tp + NP) against the panel: acc[rp][k]
// holds (row a, token 0), (row a, token 1), (row b, token 0), (row b, token 1)
// of row pair rp and token pair tp + k.
// scales: per row pair and block, the scale vector in BFMMLA's output order (a, a, b, b).
template <int NP>
void panel_tokens(const uint16_t* wp, const uint16_t* xp, int64_t quads, const float* scales, int64_t blocks,
                  float32x4_t acc[2][2]) {
  for (int rp = 0; rp < 2; ++rp)
    for (int k = 0; k < NP; ++k) acc[rp][k] = vdupq_n_f32(0.0f);
  const uint16_t* w0 = wp;
  const uint16_t* w1 = wp + quads * 8;
  for (int64_t q0 = 0, block = 0; q0 < quads; q0 += kBf16Block / 4, ++block) {
    const int64_t q1 = std::min(quads, q0 + kBf16Block / 4);
    float32x4_t p[4][2][NP];
    for (auto& lane : p)
      for (auto& row : lane)
        for (auto& v : row) v = vdupq_n_f32(0.0f);
    for (int64_t q = q0; q < q1; q += 4)  // a block's quads are a multiple of 8
      for (int lane = 0; lane < 4; ++lane) {
        const bfloat16x8_t a = load_bf16(w0 + (q + lane) * 8), b = load_bf16(w1 + (q + lane) * 8);
        for (int k = 0; k < NP; ++k) {
          const bfloat16x8_t x = load_bf16(xp + (k * quads + q + lane) * 8);
          p[lane][0][k] = vbfmmlaq_f32(p[lane][0][k], a, x);
          p[lane][1][k] = vbfmmlaq_f32(p[lane][1][k], b, x);
        }
      }
    for (int rp = 0; rp < 2; ++rp)
      for (int k = 0; k < NP; ++k) {
        const float32x4_t sum =
            vaddq_f32(vaddq_f32(p[0][rp][k], p[1][rp][k]), vaddq_f32(p[2][rp][k], p[3][rp][k]));
        acc[rp][k] = vfmaq_f32(acc[rp][k], sum, vld1q_f32(scales + (rp * blocks + block) * 4));  // fma(s, sum, acc)
      }
  }
}

}  // namespace

void matmul_bf16_rows_bfmmla(const QMatrix& W, const Bf16Rows& xb, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  if (r0 >= r1 || xb.n == 0) return;
  const int64_t quads = xb.stride / 4, pairs = (xb.n + 1) / 2;
  // Activations: [token pair][quad][token 0's 4 columns, token 1's 4] (a missing token: zeros).
  thread_local std::vector<uint16_t> xp, wp;
  thread_local std::vector<float> scales;
  xp.assign(size_t(pairs * quads * 8), 0);
  for (int64_t t = 0; t < xb.n; ++t)
    for (int64_t q = 0; q < quads; ++q)
      std::copy_n(xb.row(t) + q * 4, 4, &xp[size_t(((t / 2) * quads + q) * 8 + (t % 2) * 4)]);
  if (pairs == 1) return rows_one_pair(W, xp.data(), quads, xb.n, y, ldy, r0, r1);
  const auto* w = static_cast<const uint8_t*>(W.data);
  const auto* sc = static_cast<const float*>(W.scale);
  const int64_t blocks = (xb.stride + kBf16Block - 1) / kBf16Block;
  wp.resize(size_t(2 * quads * 8));
  scales.resize(size_t(2 * blocks * 4));
  for (int64_t r = r0; r < r1; r += 4) {
    // The panel: rows r .. r + 3 (past r1: row r1 - 1 again, its outputs dropped), padding 0.
    int64_t row[4];
    for (int i = 0; i < 4; ++i) row[i] = std::min(r + i, r1 - 1);
    for (int rp = 0; rp < 2; ++rp)
      for (int half = 0; half < 2; ++half) {
        const uint8_t* src = w + row[2 * rp + half] * W.cols;
        uint16_t* dst = &wp[size_t(rp * quads * 8 + half * 4)];
        int64_t c = 0;
        for (; c + 8 <= W.cols; c += 8) {
          const uint16x8_t v = widen_half(vld1_s8(reinterpret_cast<const int8_t*>(src + c)));
          vst1_u16(dst + (c / 4) * 8, vget_low_u16(v));
          vst1_u16(dst + (c / 4 + 1) * 8, vget_high_u16(v));
        }
        for (; c < quads * 4; ++c) dst[(c / 4) * 8 + c % 4] = c < W.cols ? bf16_weight(src[c]) : 0;  // a row's last (< 8) columns
      }
    // Per row pair and block, the scale vector in BFMMLA's output order: a, a, b, b.
    for (int rp = 0; rp < 2; ++rp)
      for (int64_t b = 0; b < blocks; ++b) {
        const float sa = sc[((W.scale_row0 + row[2 * rp]) / 128) * W.scale_cols + b];
        const float sb = sc[((W.scale_row0 + row[2 * rp + 1]) / 128) * W.scale_cols + b];
        float* v = &scales[size_t((rp * blocks + b) * 4)];
        v[0] = sa, v[1] = sa, v[2] = sb, v[3] = sb;
      }
    for (int64_t tp = 0; tp < pairs; tp += 2) {
      float32x4_t acc[2][2];
      const int np = int(std::min<int64_t>(2, pairs - tp));
      if (np == 2) panel_tokens<2>(wp.data(), &xp[size_t(tp * quads * 8)], quads, scales.data(), blocks, acc);
      else panel_tokens<1>(wp.data(), &xp[size_t(tp * quads * 8)], quads, scales.data(), blocks, acc);
      for (int rp = 0; rp < 2; ++rp)
        for (int k = 0; k < np; ++k) {
          float out[4];
          vst1q_f32(out, acc[rp][k]);
          for (int i = 0; i < 2; ++i)
            for (int j = 0; j < 2; ++j) {
              const int64_t rr = r + 2 * rp + i, t = 2 * (tp + k) + j;
              if (rr < r1 && t < xb.n) y[t * ldy + rr] = out[2 * i + j];
            }
        }
    }
  }
}

void bfmmla_once(const uint16_t n[8], const uint16_t m[8], float d[4]) {
  vst1q_f32(d, vbfmmlaq_f32(vld1q_f32(d), load_bf16(n), load_bf16(m)));
}

}  // namespace trillion
