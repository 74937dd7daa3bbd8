// The bf16 path's two definitions in scalar code (matmul_bf16.hpp), its
// driver, and the dispatch to the build's native kernel: AVX-512 BF16
// (x86/matmul_bf16_avx512.cpp) or BFMMLA (arm/matmul_bf16_bfmmla.cpp).
#include "kernels/matmul_bf16.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "common/error.hpp"
#include "common/numeric.hpp"
#include "kernels/bf16_arm_step.hpp"
#include "kernels/kernel_table.hpp"
#include "platform/cpu.hpp"

namespace trillion {

// Defined in x86/matmul_bf16_avx512.cpp (x86 builds) or generic/no_avx2.cpp.
void matmul_bf16_rows_avx512(const QMatrix& W, const Bf16Rows& xb, float* y, int64_t ldy, int64_t r0, int64_t r1);
// Defined in arm/matmul_bf16_bfmmla.cpp (arm64 builds) or generic/no_neon.cpp.
void matmul_bf16_rows_bfmmla(const QMatrix& W, const Bf16Rows& xb, float* y, int64_t ldy, int64_t r0, int64_t r1);

namespace {

// A float32 result below the smallest normal in magnitude: a zero of its sign.
float ftz(float v) { return std::fabs(v) < FLT_MIN ? std::copysign(0.0f, v) : v; }

float weight_scale(const QMatrix& W, int64_t r, int64_t c) {
  return static_cast<const float*>(W.scale)[((W.scale_row0 + r) / 128) * W.scale_cols + c / 128];
}

// Row r's w' as floats, padding 0 to the activations' stride.
void weight_row(const QMatrix& W, int64_t r, int64_t stride, std::vector<float>& wr) {
  const auto* w = static_cast<const uint8_t*>(W.data);
  wr.assign(size_t(stride), 0.0f);
  for (int64_t c = 0; c < W.cols; ++c) wr[size_t(c)] = bf16_to_f32(bf16_weight(w[r * W.cols + c]));
}

// The x86 definition's y for row r (its w' in wr) and one token's x'.
float dot_x86(const QMatrix& W, int64_t r, const std::vector<float>& wr, const uint16_t* x, int64_t stride) {
  float acc[16] = {};
  for (int64_t b = 0; b < stride; b += kBf16Block) {
    float a[16] = {};
    for (int64_t j = b; j < std::min(b + kBf16Block, stride); j += kBf16Chunk)
      for (int l = 0; l < 16; ++l) {
        const int64_t e = j + 2 * l, o = e + 1;
        a[l] = ftz(std::fma(wr[size_t(o)], bf16_to_f32(x[o]), a[l]));
        a[l] = ftz(std::fma(wr[size_t(e)], bf16_to_f32(x[e]), a[l]));
      }
    const float s = weight_scale(W, r, b);
    for (int l = 0; l < 16; ++l) acc[l] = std::fma(s, a[l], acc[l]);
  }
  for (int width = 8; width >= 1; width /= 2)
    for (int l = 0; l < width; ++l) acc[l] = acc[l] + acc[l + width];
  return acc[0];
}

// The Arm definition's.
float dot_arm(const QMatrix& W, int64_t r, const std::vector<float>& wr, const uint16_t* x, int64_t stride) {
  const auto xv = [&](int64_t c) { return bf16_to_f32(x[c]); };
  float acc = 0.0f;
  for (int64_t b = 0; b < stride; b += kBf16Block) {
    float a[4] = {};
    for (int64_t c = b, j = 0; c < std::min(b + kBf16Block, stride); c += 4, ++j) {
      float& q = a[j % 4];
      q = arm_bf16::step(q, wr[size_t(c)], xv(c), wr[size_t(c + 1)], xv(c + 1));
      q = arm_bf16::step(q, wr[size_t(c + 2)], xv(c + 2), wr[size_t(c + 3)], xv(c + 3));
    }
    acc = std::fma(weight_scale(W, r, b), (a[0] + a[1]) + (a[2] + a[3]), acc);
  }
  return acc;
}

void rows_ref(Bf16Family family, const QMatrix& W, const Bf16Rows& xb, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  const auto dot = family == Bf16Family::arm ? dot_arm : dot_x86;
  std::vector<float> wr;
  for (int64_t r = r0; r < r1; ++r) {
    weight_row(W, r, xb.stride, wr);
    for (int64_t t = 0; t < xb.n; ++t) y[t * ldy + r] = dot(W, r, wr, xb.row(t), xb.stride);
  }
}

std::atomic<Bf16Family> family{kBf16Family};

// The build's native kernel where the CPU has it, else its definition in
// scalar code (and the other family's, where a test asked for it).
void rows(const QMatrix& W, const Bf16Rows& xb, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  const Bf16Family f = family.load(std::memory_order_relaxed);
  if (f != kBf16Family || !bf16_native()) rows_ref(f, W, xb, y, ldy, r0, r1);
  else if (kBf16Family == Bf16Family::arm) matmul_bf16_rows_bfmmla(W, xb, y, ldy, r0, r1);
  else matmul_bf16_rows_avx512(W, xb, y, ldy, r0, r1);
}

}  // namespace

const char* to_string(Bf16Family f) { return f == Bf16Family::arm ? "arm" : "x86"; }
void set_bf16_family(Bf16Family f) { family.store(f); }
Bf16Family bf16_family() { return family.load(); }

uint16_t bf16_round(float v) {
  if (std::fabs(v) < FLT_MIN) return uint16_t((std::bit_cast<uint32_t>(v) >> 16) & 0x8000u);  // subnormal: signed zero
  return f32_to_bf16(v);  // a normal rounds to a normal or infinity (FLT_MIN is a bf16)
}

uint16_t bf16_weight(uint8_t w) {
  if ((w & 0x7F) == 0x7F) return w & 0x80 ? 0xC3F0 : 0x43F0;  // +-480: the NaN codes as the f32 path reads them
  return f32_to_bf16(fp8e4m3_to_f32(w));                        // exact: 3 mantissa bits
}

void round_bf16_rows(const float* x, int64_t n, int64_t cols, Bf16Rows& out) {
  out.n = n;
  out.cols = cols;
  out.stride = (cols + kBf16Chunk - 1) / kBf16Chunk * kBf16Chunk;
  out.v.resize(size_t(n * out.stride));  // every element is written below: a reused buffer gets no zero-fill pass
  for (int64_t t = 0; t < n; ++t) {
    uint16_t* row = out.v.data() + t * out.stride;
    for (int64_t c = 0; c < cols; ++c) row[c] = bf16_round(x[t * cols + c]);
    std::fill(row + cols, row + out.stride, uint16_t(0));
  }
}

bool bf16_supports(MatFormat f) { return f == MatFormat::FP8_B128; }

bool bf16_native() {
  static const bool yes = kBf16Family == Bf16Family::arm ? platform::arm_has_bf16() : cpu_has_avx512_bf16();
  return yes;
}

bool bf16_auto_faster() {
#if defined(__aarch64__)
  return bf16_native();
#else
  return false;
#endif
}

namespace {
void check_operands(const QMatrix& W, const Bf16Rows& xb) {
  check_qmatrix(W);
  if (!bf16_supports(W.format)) throw Error("matmul_bf16: only FP8_B128 weights take the bf16 path");
  if (xb.cols != W.cols) throw Error("matmul_bf16: activations have " + std::to_string(xb.cols) + " columns, W " +
                                     std::to_string(W.cols));
}
}  // namespace

void matmul_bf16_serial(const QMatrix& W, const Bf16Rows& xb, float* y, int64_t ldy) {
  check_operands(W, xb);
  rows(W, xb, y, ldy, 0, W.rows);
}

void matmul_bf16(const QMatrix& W, const Bf16Rows& xb, float* y, ThreadPool& pool) {
  check_operands(W, xb);
  // Blocks of whole 4-row panels (the kernels' tile); any split gives the same bits.
  pool.parallel_for(W.rows, 16, [&](int64_t r0, int64_t r1) { rows(W, xb, y, W.rows, r0, r1); });
}

void matmul_bf16_ref(const QMatrix& W, const Bf16Rows& xb, float* y, Bf16Family family) {
  rows_ref(family, W, xb, y, W.rows, 0, W.rows);
}

}  // namespace trillion
