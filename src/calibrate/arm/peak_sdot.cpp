// The NEON integer path's int8 dot product (peak_probe.hpp): SDOT, 16
// multiply-adds of signed bytes into 4 int32 lanes (matmul_q8_sdot.cpp).
// Built with +dotprod; run only where the CPU has it.
#include <arm_neon.h>

#include <cstdint>

#include "calibrate/peak_chains.hpp"

namespace trillion {
namespace {

int32x4_t sdot(int32x4_t a) { return vdotq_s32(a, vdupq_n_s8(3), vdupq_n_s8(-5)); }

}  // namespace

PeakLoop peak_sdot() { return peak_loop<AccumulatorChains<sdot, int32_t, 16>>(); }

}  // namespace trillion
