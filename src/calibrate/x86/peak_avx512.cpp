// AVX-512 peak probes (peak_probe.hpp), run only where the avx512 path is
// available: FP32 FMA on zmm (a core with full-width AVX-512, Zen 5, does
// twice the FLOP per instruction; one with two 256-bit passes, Zen 4, the
// same) and the avx512 path's int8 dot product, vpdpbusd on zmm (64
// multiply-adds, matmul_q8_avx512.cpp's instruction). Built with the AVX-512
// flags.
#include <immintrin.h>

#include <cstdint>

#include "calibrate/peak_chains.hpp"

namespace trillion {
namespace {

__m512 fma_zmm(__m512 a) { return _mm512_fmadd_ps(a, _mm512_set1_ps(0.999999f), _mm512_set1_ps(1e-7f)); }
__m512i dpbusd_zmm(__m512i a) { return _mm512_dpbusd_epi32(a, _mm512_set1_epi8(3), _mm512_set1_epi8(-5)); }

}  // namespace

PeakLoop peak_fma_zmm() { return peak_loop<AccumulatorChains<fma_zmm, float, 16>>(); }
PeakLoop peak_dpbusd_zmm() { return peak_loop<AccumulatorChains<dpbusd_zmm, int32_t, 16>>(); }

}  // namespace trillion
