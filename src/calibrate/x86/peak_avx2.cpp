// AVX2 peak probes (peak_probe.hpp): FP32 FMA on ymm, and the avx2 path's
// int8 dot product, vpmaddubsw + vpmaddwd (32 multiply-adds of unsigned by
// signed bytes, summed to int32 lanes: matmul_q8_avx2.cpp's lane sum) plus
// the vpaddd that accumulates it. Built with -mavx2 -mfma; run only where the
// avx2 path is available.
#include <immintrin.h>

#include "calibrate/peak_chains.hpp"

namespace trillion {
namespace {

// 16 chains: 2 ports x 4 cycles would need 8, but a Zen 5 core reaches its
// peak only with 16 chains of 256-bit FMAs.
__m256 fma_ymm(__m256 a) { return _mm256_fmadd_ps(a, _mm256_set1_ps(0.999999f), _mm256_set1_ps(1e-7f)); }

// A chain is only its vpaddd (1 cycle), so 4 chains keep the two multiply
// ports busy: two unsigned operands (registers made opaque each round) times
// two signed constants, 4 distinct products in 9 registers (more chains made
// GCC keep some accumulators in memory). Feeding the accumulator into the
// multiplies instead would make a chain 7 cycles deep; it read about 60% of
// this rate.
struct PairYmm {
  using V = __m256i;
  struct Operands {
    __m256i a0, a1;
  };
  static constexpr int kChains = 4;
  static V init(int k) { return _mm256_set1_epi32(k); }
  static Operands operands() { return {_mm256_set1_epi8(7), _mm256_set1_epi8(9)}; }
  static void opaque(Operands& o) { __asm__("" : "+x"(o.a0), "+x"(o.a1)); }
  static V step(V acc, const Operands& o, int k) {
    const __m256i s16 = _mm256_maddubs_epi16(k % 2 ? o.a1 : o.a0, _mm256_set1_epi8(k / 2 ? char(-5) : char(3)));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(s16, _mm256_set1_epi16(1)));
  }
  static double fold(V a) { return double(_mm256_cvtsi256_si32(a)); }
};

}  // namespace

PeakLoop peak_fma_ymm() { return peak_loop<AccumulatorChains<fma_ymm, float, 16>>(); }
PeakLoop peak_pair_ymm() { return peak_loop<PairYmm>(); }

}  // namespace trillion
