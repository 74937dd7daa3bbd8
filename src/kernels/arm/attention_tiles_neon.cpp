// NEON dot_tile / axpy_tile (kernel_table.hpp): attention over a cache block
// as register tiles, each output with exactly the bits of neon::dot / axpy
// (vector_neon.cpp), as the AVX2 tiles do for theirs (x86/attention_tiles_avx2.cpp
// says why). dot's four accumulator chains never meet before the end, so
// they run one after the other: 3 rows of a x 4 rows of b, 12 accumulators
// per chain. axpy_tile keeps 4 rows of y x 16 columns while it walks the
// positions. Accumulators are named variables (an array of vectors may be
// kept in memory by the compiler, a store per FMA). Bits tested under qemu
// (kernel_selftest, tests/kernels); not timed on arm64 hardware here.
#include <arm_neon.h>

#include <cmath>
#include <cstdint>

namespace trillion::neon {

float dot(const float* a, const float* b, int64_t n);
void axpy(float alpha, const float* x, float* y, int64_t n);

namespace {

// Columns of chain c (dot's acc[c]): 16k + 4c for every whole 16-block, then
// the c-th of the last 4-steps when there is one (vector_neon.cpp's blocking).
struct Chain {
  int64_t n16, steps;  // whole 16-blocks' end; 4-steps after it (0..3)
};

void dot_chain_3x4(const float* a, int64_t lda, const float* b, int64_t ldb, const Chain& ch, int c,
                   float32x4_t (&out)[3][4]) {
  float32x4_t t00 = vdupq_n_f32(0.0f), t01 = t00, t02 = t00, t03 = t00, t10 = t00, t11 = t00, t12 = t00, t13 = t00,
              t20 = t00, t21 = t00, t22 = t00, t23 = t00;
  auto step = [&](int64_t i) {
    const float32x4_t a0 = vld1q_f32(a + i), a1 = vld1q_f32(a + lda + i), a2 = vld1q_f32(a + 2 * lda + i);
#define COL(j)                                       \
  {                                                  \
    const float32x4_t bv = vld1q_f32(b + j * ldb + i); \
    t0##j = vfmaq_f32(t0##j, a0, bv);                \
    t1##j = vfmaq_f32(t1##j, a1, bv);                \
    t2##j = vfmaq_f32(t2##j, a2, bv);                \
  }
    COL(0) COL(1) COL(2) COL(3)
#undef COL
  };
  for (int64_t i = 4 * c; i < ch.n16; i += 16) step(i);
  if (c < ch.steps) step(ch.n16 + 4 * c);
#define COL(j) out[0][j] = t0##j, out[1][j] = t1##j, out[2][j] = t2##j;
  COL(0) COL(1) COL(2) COL(3)
#undef COL
}

void dot_block_3x4(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t n, float* out, int64_t ldo) {
  const Chain ch{n / 16 * 16, (n - n / 16 * 16) / 4};
  float32x4_t acc[4][3][4];
  for (int c = 0; c < 4; ++c) dot_chain_3x4(a, lda, b, ldb, ch, c, acc[c]);
  const int64_t tail = ch.n16 + 4 * ch.steps;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {  // dot's reduction: (0+1)+(2+3) lane-wise, lanes (0+2)+(1+3), the tail
      const float32x4_t v = vaddq_f32(vaddq_f32(acc[0][i][j], acc[1][i][j]), vaddq_f32(acc[2][i][j], acc[3][i][j]));
      const float32x2_t p = vadd_f32(vget_low_f32(v), vget_high_f32(v));
      float s = vget_lane_f32(p, 0) + vget_lane_f32(p, 1);
      for (int64_t k = tail; k < n; ++k) s += a[i * lda + k] * b[j * ldb + k];
      out[i * ldo + j] = s;
    }
}

// y rows 0..3, columns [0, 16): y_i = fma(y_i, p_ij, x_j) for each position j in order.
void axpy_block_4x16(const float* p, int64_t ldp, const float* x, int64_t ldx, int64_t nb, float* y, int64_t ldy) {
#define ROW(i)                                                                                         \
  float32x4_t y##i##0 = vld1q_f32(y + i * ldy), y##i##1 = vld1q_f32(y + i * ldy + 4),                \
              y##i##2 = vld1q_f32(y + i * ldy + 8), y##i##3 = vld1q_f32(y + i * ldy + 12);
  ROW(0) ROW(1) ROW(2) ROW(3)
#undef ROW
  for (int64_t j = 0; j < nb; ++j) {
    const float32x4_t x0 = vld1q_f32(x + j * ldx), x1 = vld1q_f32(x + j * ldx + 4), x2 = vld1q_f32(x + j * ldx + 8),
                      x3 = vld1q_f32(x + j * ldx + 12);
#define ROW(i)                                       \
  {                                                  \
    const float32x4_t pv = vdupq_n_f32(p[i * ldp + j]); \
    y##i##0 = vfmaq_f32(y##i##0, pv, x0);            \
    y##i##1 = vfmaq_f32(y##i##1, pv, x1);            \
    y##i##2 = vfmaq_f32(y##i##2, pv, x2);            \
    y##i##3 = vfmaq_f32(y##i##3, pv, x3);            \
  }
    ROW(0) ROW(1) ROW(2) ROW(3)
#undef ROW
  }
#define ROW(i)                                                                            \
  vst1q_f32(y + i * ldy, y##i##0), vst1q_f32(y + i * ldy + 4, y##i##1),                  \
      vst1q_f32(y + i * ldy + 8, y##i##2), vst1q_f32(y + i * ldy + 12, y##i##3);
  ROW(0) ROW(1) ROW(2) ROW(3)
#undef ROW
}

}  // namespace

void dot_tile(const float* a, int64_t lda, int64_t na, const float* b, int64_t ldb, int64_t nb, int64_t n, float* out,
              int64_t ldo, const float* /*b_next: not used yet (not timed on arm64 hardware)*/) {
  const int64_t na3 = na / 3 * 3, nb4 = nb / 4 * 4;
  for (int64_t i = 0; i < na3; i += 3)
    for (int64_t j = 0; j < nb4; j += 4) dot_block_3x4(a + i * lda, lda, b + j * ldb, ldb, n, out + i * ldo + j, ldo);
  // The edges, one dot at a time (the definition itself).
  for (int64_t i = 0; i < na; ++i)
    for (int64_t j = i < na3 ? nb4 : 0; j < nb; ++j) out[i * ldo + j] = dot(a + i * lda, b + j * ldb, n);
}

void axpy_tile(const float* p, int64_t ldp, int64_t na, const float* x, int64_t ldx, int64_t nb, float* y, int64_t ldy,
               int64_t n) {
  const int64_t na4 = na / 4 * 4, n16 = n / 16 * 16;
  for (int64_t c = 0; c < n16; c += 16)
    for (int64_t i = 0; i < na4; i += 4) axpy_block_4x16(p + i * ldp, ldp, x + c, ldx, nb, y + i * ldy + c, ldy);
  // The edges: rows past the last 4, and columns past the last 16 (axpy
  // applies one fma per element, so any column range keeps its bits).
  for (int64_t i = 0; i < na; ++i) {
    const int64_t c0 = i < na4 ? n16 : 0;
    if (c0 < n)
      for (int64_t j = 0; j < nb; ++j) axpy(p[i * ldp + j], x + j * ldx + c0, y + i * ldy + c0, n - c0);
  }
}

}  // namespace trillion::neon
