// The bf16 path (matmul_bf16.hpp) on AVX-512 BF16: vdpbf16ps, 16 float
// lanes of 32 bf16 pairs per instruction, one zmm accumulator per output.
//
// The weights are converted once per call and 4-row panel into a per-thread
// buffer (w' of the definition: e4m3 to float by bit placement, times 2^120
// and the block scale, then vcvtne2ps2bf16), and every token of the call
// reads that panel: the conversion (about 15 instructions per 32 weights)
// is paid once per weight and call, not per token. A tile is 4 rows x 6
// tokens, 24 accumulators: per 32 columns, 4 panel loads, 6 activation
// loads and 24 vdpbf16ps. Rows past the last whole panel take tiles of 1-3
// rows; the bits are the definition's in every tile (tests/kernels).
//
// e4m3 to float without a table: the byte sign-extended to 32 bits and
// shifted left by 20 puts exponent and mantissa where a float's lowest
// exponent bits and top mantissa bits are, and the sign at bit 31 (bits
// 27-30 are masked off): that float is the e4m3 value times 2^-120 for
// normal and subnormal bytes alike (a subnormal e4m3 lands on a float
// subnormal), so times 2^120 it is exact; NaN bytes (0x7F, 0xFF) are set
// apart by a compare. Needs DAZ off (the process default; nothing here sets it).
//
// Built with AVX-512 BF16 flags; runs only after the CPUID check.
#include "kernels/x86/avx512_intrinsics.hpp"  // first: <immintrin.h>, GCC 12's warnings from it silenced

#include <cpuid.h>

#include <algorithm>
#include <vector>

#include "kernels/kernel_table.hpp"
#include "kernels/matmul_bf16.hpp"
#include "kernels/named_regs.hpp"

namespace trillion {
namespace {

using F32x16 = float __attribute__((vector_size(64)));    // __m512 without may_alias (NamedRegs)
using Bf16x32 = int16_t __attribute__((vector_size(64)));  // a panel's chunk: __m512i without may_alias (std::vector)
constexpr int kRows = 4, kTokens = 6;

// Columns [32j, 32j + 32) of one FP8 row as the definition's w' (bf16);
// `valid` < 32 for a partial last chunk (its other lanes are 0).
[[gnu::always_inline]] inline __m512i convert_chunk(const uint8_t* p, int valid, float scale) {
  const __m256i b = valid >= 32 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))
                                : _mm256_maskz_loadu_epi8(__mmask32((uint64_t(1) << valid) - 1), p);
  const __m512 s = _mm512_set1_ps(scale), two120 = _mm512_set1_ps(0x1p120f);
  auto half = [&](__m128i bytes, int lo) {
    const __m512i v = _mm512_cvtepi8_epi32(bytes);
    const __m512i bits = _mm512_and_si512(_mm512_slli_epi32(v, 20), _mm512_set1_epi32(int32_t(0x87F00000u)));
    __m512 f = _mm512_mul_ps(_mm512_mul_ps(_mm512_castsi512_ps(bits), two120), s);
    const __mmask16 nan = _mm512_cmpeq_epi32_mask(_mm512_and_si512(v, _mm512_set1_epi32(0x7F)), _mm512_set1_epi32(0x7F));
    f = _mm512_mask_mov_ps(f, nan, _mm512_set1_ps(__builtin_nanf("")));
    if (valid < 32) {  // columns past the row: w' = 0 whatever the scale
      const int n = std::clamp(valid - lo, 0, 16);
      f = _mm512_maskz_mov_ps(__mmask16((1u << n) - 1), f);
    }
    return f;
  };
  const __m512 f0 = half(_mm256_castsi256_si128(b), 0), f1 = half(_mm256_extracti128_si256(b, 1), 16);
  return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(f1, f0));  // words 0-15 from f0, 16-31 from f1
}

// Rows r .. r + R - 1 into p[i * chunks + j].
template <int R>
void pack(const QMatrix& W, int64_t r, int64_t chunks, std::vector<Bf16x32>& p) {
  const auto* w = static_cast<const uint8_t*>(W.data);
  const auto* sc = static_cast<const float*>(W.scale);
  for (int i = 0; i < R; ++i) {
    const uint8_t* row = w + (r + i) * W.cols;
    const float* srow = sc + ((W.scale_row0 + r + i) / 128) * W.scale_cols;
    for (int64_t j = 0; j < chunks; ++j) {
      const int64_t c = j * kBf16Chunk;
      p[size_t(i * chunks + j)] = (Bf16x32)convert_chunk(row + c, int(std::min<int64_t>(32, W.cols - c)), srow[c / 128]);
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

template <int R, int T>
void tile(const Bf16x32* p, int64_t chunks, const Bf16Rows& xb, int64_t t0, float* y, int64_t ldy, int64_t r) {
  static_assert(R * T <= 24);
  NamedRegs<F32x16> acc;  // zeros; output (r + i, t0 + t) at i * T + t
  const uint16_t* x[T];
  for (int t = 0; t < T; ++t) x[t] = xb.row(t0 + t);
  for (int64_t j = 0; j < chunks; ++j) {
    __m512i xv[T];
    for (int t = 0; t < T; ++t) xv[t] = _mm512_loadu_si512(x[t] + j * kBf16Chunk);
    unrolled<R>([&]<int i>() __attribute__((always_inline)) {
      const __m512i w = (__m512i)p[i * chunks + j];
      unrolled<T>([&]<int t>() __attribute__((always_inline)) {
        F32x16& a = acc.at<i * T + t>();
        a = reinterpret_cast<F32x16>(_mm512_dpbf16_ps(reinterpret_cast<__m512>(a), reinterpret_cast<__m512bh>(w),
                                                      reinterpret_cast<__m512bh>(xv[t])));
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
  int64_t t = 0;
  for (; t + kTokens <= xb.n; t += kTokens) tile<R, kTokens>(p.data(), chunks, xb, t, y, ldy, r);
  switch (xb.n - t) {
    case 5: tile<R, 5>(p.data(), chunks, xb, t, y, ldy, r); break;
    case 4: tile<R, 4>(p.data(), chunks, xb, t, y, ldy, r); break;
    case 3: tile<R, 3>(p.data(), chunks, xb, t, y, ldy, r); break;
    case 2: tile<R, 2>(p.data(), chunks, xb, t, y, ldy, r); break;
    case 1: tile<R, 1>(p.data(), chunks, xb, t, y, ldy, r); break;
    default: break;
  }
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
  switch (r1 - r) {
    case 3: rows_of<3>(W, xb, y, ldy, r, panel); break;
    case 2: rows_of<2>(W, xb, y, ldy, r, panel); break;
    case 1: rows_of<1>(W, xb, y, ldy, r, panel); break;
    default: break;
  }
}

}  // namespace trillion
