// AVX-512 peak probes (peak_probe.hpp), run only where the avx512 path is
// available: FP32 FMA on zmm (a core with full-width AVX-512, Zen 5, does
// twice the FLOP per instruction; one with two 256-bit passes, Zen 4, the
// same) and the avx512 path's int8 dot product, vpdpbusd on zmm (64
// multiply-adds, matmul_q8_avx512.cpp's instruction). Built with the AVX-512
// flags.
#include <immintrin.h>

#include "calibrate/peak_chains.hpp"

namespace trillion {
namespace {

struct FmaZmm : NoOperands {
  using V = __m512;
  static constexpr int kChains = 16;
  static V init(int k) { return _mm512_set1_ps(1.0f + float(k) * 1e-3f); }
  static V step(V a, const Operands&, int) { return _mm512_fmadd_ps(a, _mm512_set1_ps(0.999999f), _mm512_set1_ps(1e-7f)); }
  static double fold(V a) { return _mm512_cvtss_f32(a); }
};

struct DpbusdZmm : NoOperands {
  using V = __m512i;
  static constexpr int kChains = 16;
  static V init(int k) { return _mm512_set1_epi32(k); }
  static V step(V a, const Operands&, int) { return _mm512_dpbusd_epi32(a, _mm512_set1_epi8(3), _mm512_set1_epi8(-5)); }
  static double fold(V a) { return double(_mm512_cvtsi512_si32(a)); }
};

}  // namespace

PeakLoop peak_fma_zmm() { return peak_loop<FmaZmm>(); }
PeakLoop peak_dpbusd_zmm() { return peak_loop<DpbusdZmm>(); }

}  // namespace trillion
