// The avx2-vnni path's int8 dot product (peak_probe.hpp): AVX-VNNI vpdpbusd
// on ymm, 32 multiply-adds of unsigned by signed bytes into int32 lanes, the
// instruction of matmul_q8_vnni.cpp. Built with -mavxvnni; run only where the
// avx2-vnni path is available.
#include <immintrin.h>

#include "calibrate/peak_chains.hpp"

namespace trillion {
namespace {

// The accumulator is the chain (the operands are constants); 12 chains and the two operands fit the 16 ymm
// registers (vpdpbusd: about 5 cycles deep, 2 a cycle on the cores that have it).
struct DpbusdYmm : NoOperands {
  using V = __m256i;
  static constexpr int kChains = 12;
  static V init(int k) { return _mm256_set1_epi32(k); }
  static V step(V a, const Operands&, int) { return _mm256_dpbusd_avx_epi32(a, _mm256_set1_epi8(3), _mm256_set1_epi8(-5)); }
  static double fold(V a) { return double(_mm256_cvtsi256_si32(a)); }
};

}  // namespace

PeakLoop peak_dpbusd_ymm() { return peak_loop<DpbusdYmm>(); }

}  // namespace trillion
