// The AVX-512 BF16 peak probe (peak_probe.hpp): vdpbf16ps on zmm, 32 bf16
// pair products into 16 float lanes (kernels/x86/matmul_bf16_avx512.cpp's
// instruction), run only where the CPU has AVX-512 BF16. Built with its flags.
#include <immintrin.h>

#include "calibrate/peak_chains.hpp"

namespace trillion {
namespace {

__m512 dpbf16_zmm(__m512 a) {
  return _mm512_dpbf16_ps(a, reinterpret_cast<__m512bh>(_mm512_set1_epi16(0x3F80)),
                          reinterpret_cast<__m512bh>(_mm512_set1_epi16(0x3400)));
}

}  // namespace

PeakLoop peak_dpbf16_zmm() { return peak_loop<AccumulatorChains<dpbf16_zmm, float, 16>>(); }

}  // namespace trillion
