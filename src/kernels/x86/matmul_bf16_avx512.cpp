// The bf16 path (matmul_bf16.hpp) on AVX-512 BF16: vdpbf16ps, 16 float
// lanes of 32 bf16 pairs per instruction, two zmm accumulators per output
// (the 128-column block's partial sums, and the scaled total).
//
// The weights are converted once per call and 4-row panel into a per-thread
// buffer (w' of the definition: e4m3 to bf16 by bit placement, about 10
// instructions per 32 weights, load included), and every token of the call reads that
// panel: the conversion is paid once per weight and call, not per token. A
// tile is 4 rows x 3 tokens, 12 block accumulators and 12 totals: per 32
// columns 4 panel loads, 3 activation loads and 12 vdpbf16ps; per 128
// columns 12 FMAs fold the blocks into the totals with the rows' scales.
// Rows past the last whole panel take tiles of 1-3 rows; the bits are the
// definition's in every tile (tests/kernels).
//
// e4m3 to bf16: a normal byte's exponent and mantissa, shifted left by 4,
// are a bf16's less the exponent bias difference (120 << 7); the 7
// subnormal magnitudes (m * 2^-9, normal in bf16) come from a table by
// vpermw, the sign by a shift (0x7F and 0xFF land on +-480, as the
// definition says).
//
// Built with AVX-512 BF16 flags; runs only after the CPUID check.
#include "kernels/x86/avx512_intrinsics.hpp"  // first: <immintrin.h>, GCC 12's warnings from it silenced

#include <cpuid.h>

#include <algorithm>
#include <bit>
#include <vector>

#include "kernels/kernel_table.hpp"
#include "kernels/matmul_bf16.hpp"
#include "kernels/named_regs.hpp"

namespace trillion {
namespace {

using F32x16 = float __attribute__((vector_size(64)));    // __m512 without may_alias (NamedRegs)
using Bf16x32 = int16_t __attribute__((vector_size(64)));  // a panel's chunk: __m512i without may_alias (std::vector)
constexpr int kRows = 4, kTokens = 3;

// The bf16 bits of m * 2^-9, m = 0..7 (e4m3's subnormal magnitudes), at the
// first 8 of vpermw's 32 word indices.
__m512i subnormal_table() {
  alignas(64) uint16_t t[32] = {};
  for (int m = 0; m < 8; ++m) t[m] = uint16_t(std::bit_cast<uint32_t>(float(m) * 0x1p-9f) >> 16);  // exact
  return _mm512_load_si512(t);
}

// Columns [32j, 32j + 32) of one FP8 row as the definition's w' (bf16);
// `valid` < 32 for a partial last chunk (its other lanes are 0: byte 0 is +0).
[[gnu::always_inline]] inline __m512i convert_chunk(const uint8_t* p, int valid, __m512i subnormals) {
  const __m256i b = valid >= 32 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))
                                : _mm256_maskz_loadu_epi8(__mmask32((uint64_t(1) << valid) - 1), p);
  const __m512i v = _mm512_cvtepu8_epi16(b);
  const __m512i mag = _mm512_and_si512(v, _mm512_set1_epi16(0x7F));
  __m512i w = _mm512_add_epi16(_mm512_slli_epi16(mag, 4), _mm512_set1_epi16(120 << 7));  // normal bytes
  w = _mm512_mask_mov_epi16(w, _mm512_cmplt_epu16_mask(mag, _mm512_set1_epi16(8)),
                            _mm512_permutexvar_epi16(mag, subnormals));  // zero and subnormal bytes
  // | the sign: byte bit 7 to word bit 15 (vpternlog: w | (v << 8 & 0x8000)).
  return _mm512_ternarylogic_epi32(w, _mm512_slli_epi16(v, 8), _mm512_set1_epi16(int16_t(0x8000)), 0xF8);
}

// Rows r .. r + R - 1 into p[i * chunks + j].
template <int R>
void pack(const QMatrix& W, int64_t r, int64_t chunks, std::vector<Bf16x32>& p) {
  const auto* w = static_cast<const uint8_t*>(W.data);
  const __m512i subnormals = subnormal_table();
  for (int i = 0; i < R; ++i) {
    const uint8_t* row = w + (r + i) * W.cols;
    for (int64_t j = 0; j < chunks; ++j) {
      const int64_t c = j * kBf16Chunk;
      p[size_t(i * chunks + j)] = (Bf16x32)convert_chunk(row + c, int(std::min<int64_t>(32, W.cols - c)), subnormals);
    }
  }
}

// y = the definition's tree over 16 lanes: (l, l+8), (l, l+4), (l, l+2), (l, l+1).
[[gnu::always_inline]] inline float tree(__m512 a) {
  const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

// scales[i]: row r + i's block scales (one per 128 columns).
template <int R, int T>
void tile(const Bf16x32* p, int64_t chunks, const float* const* scales, const Bf16Rows& xb, int64_t t0, float* y,
          int64_t ldy, int64_t r) {
  static_assert(R * T <= 12);
  NamedRegs<F32x16> acc;  // zeros; output (r + i, t0 + t) at i * T + t; [R * T, 2 R * T): its block's sums
  const uint16_t* x[T];
  for (int t = 0; t < T; ++t) x[t] = xb.row(t0 + t);
  constexpr int64_t kPerBlock = kBf16Block / kBf16Chunk;
  for (int64_t j0 = 0; j0 < chunks; j0 += kPerBlock) {
    unrolled<R * T>([&]<int k>() __attribute__((always_inline)) { acc.at<R * T + k>() = F32x16{}; });
    for (int64_t j = j0; j < std::min(j0 + kPerBlock, chunks); ++j) {
      __m512i xv[T];
      for (int t = 0; t < T; ++t) xv[t] = _mm512_loadu_si512(x[t] + j * kBf16Chunk);
      unrolled<R>([&]<int i>() __attribute__((always_inline)) {
        const __m512i w = (__m512i)p[i * chunks + j];
        unrolled<T>([&]<int t>() __attribute__((always_inline)) {
          F32x16& a = acc.at<R * T + i * T + t>();
          a = reinterpret_cast<F32x16>(_mm512_dpbf16_ps(reinterpret_cast<__m512>(a), reinterpret_cast<__m512bh>(w),
                                                        reinterpret_cast<__m512bh>(xv[t])));
        });
      });
    }
    unrolled<R>([&]<int i>() __attribute__((always_inline)) {
      const __m512 s = _mm512_set1_ps(scales[i][j0 / kPerBlock]);
      unrolled<T>([&]<int t>() __attribute__((always_inline)) {
        F32x16& total = acc.at<i * T + t>();
        total = reinterpret_cast<F32x16>(_mm512_fmadd_ps(s, reinterpret_cast<__m512>(acc.at<R * T + i * T + t>()),
                                                         reinterpret_cast<__m512>(total)));
      });
    });
  }
  unrolled<R * T>([&]<int k>() __attribute__((always_inline)) {
    y[(t0 + k % T) * ldy + r + k / T] = tree(reinterpret_cast<__m512>(acc.at<k>()));
  });
}

template <int R>
void rows_of(const QMatrix& W, const Bf16Rows& xb, float* y, int64_t ldy, int64_t r, std::vector<Bf16x32>& p) {
  const int64_t chunks = xb.stride / kBf16Chunk;
  p.resize(size_t(R * chunks));
  pack<R>(W, r, chunks, p);
  const float* scales[R];
  for (int i = 0; i < R; ++i)
    scales[i] = static_cast<const float*>(W.scale) + ((W.scale_row0 + r + i) / 128) * W.scale_cols;
  int64_t t = 0;
  for (; t + kTokens <= xb.n; t += kTokens) tile<R, kTokens>(p.data(), chunks, scales, xb, t, y, ldy, r);
  const int64_t rest = xb.n - t;  // 0 .. kTokens - 1
  unrolled<kTokens - 1>([&]<int k>() __attribute__((always_inline)) {
    if (rest == k + 1) tile<R, k + 1>(p.data(), chunks, scales, xb, t, y, ldy, r);
  });
}

}  // namespace

// AVX-512 F (EBX 16), BW (30), VL (31) in CPUID.(EAX=7, ECX=0), BF16 (EAX
// 5) in CPUID.(EAX=7, ECX=1), and the OS saving opmask and ZMM state.
bool cpu_has_avx512_bf16() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!cpu_has_avx512_vnni()) return false;  // F, BW, DQ, VL and the XCR0 check
  if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
  return (a & (1u << 5)) != 0;
}

void matmul_bf16_rows_avx512(const QMatrix& W, const Bf16Rows& xb, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  thread_local std::vector<Bf16x32> panel;  // grows to the largest call's 4 rows; one per pool thread
  int64_t r = r0;
  for (; r + kRows <= r1; r += kRows) rows_of<kRows>(W, xb, y, ldy, r, panel);
  const int64_t rest = r1 - r;  // 0 .. kRows - 1
  unrolled<kRows - 1>([&]<int k>() __attribute__((always_inline)) {
    if (rest == k + 1) rows_of<k + 1>(W, xb, y, ldy, r, panel);
  });
}

}  // namespace trillion
