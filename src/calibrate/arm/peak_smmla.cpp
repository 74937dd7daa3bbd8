// The neon-i8mm path's INT4 dot product (peak_probe.hpp): SMMLA, a 2 x 8 by
// 8 x 2 product of signed bytes into 2 x 2 int32 (32 multiply-adds,
// matmul_q8_smmla.cpp). Built with +i8mm; run only where the CPU has it.
#include <arm_neon.h>

#include <cstdint>

#include "calibrate/peak_chains.hpp"

namespace trillion {
namespace {

int32x4_t smmla(int32x4_t a) { return vmmlaq_s32(a, vdupq_n_s8(3), vdupq_n_s8(-5)); }

}  // namespace

PeakLoop peak_smmla() { return peak_loop<AccumulatorChains<smmla, int32_t, 16>>(); }

}  // namespace trillion
