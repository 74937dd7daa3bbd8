// The avx2-vnni path's int8 dot product (peak_probe.hpp): AVX-VNNI vpdpbusd
// on ymm, 32 multiply-adds of unsigned by signed bytes into int32 lanes, the
// instruction of matmul_q8_vnni.cpp. Built with -mavxvnni; run only where the
// avx2-vnni path is available.
#include <immintrin.h>

#include <cstdint>

#include "calibrate/peak_chains.hpp"

namespace trillion {
namespace {

// 12 chains and the two operands fit the 16 ymm registers (vpdpbusd: about
// 5 cycles deep, 2 a cycle on the cores that have it).
__m256i dpbusd_ymm(__m256i a) { return _mm256_dpbusd_avx_epi32(a, _mm256_set1_epi8(3), _mm256_set1_epi8(-5)); }

}  // namespace

PeakLoop peak_dpbusd_ymm() { return peak_loop<AccumulatorChains<dpbusd_ymm, int32_t, 12>>(); }

}  // namespace trillion
