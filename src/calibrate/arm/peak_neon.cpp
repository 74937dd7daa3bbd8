// NEON peak probe (peak_probe.hpp): FP32 FMA on 4 lanes (fmla), every arm64
// CPU. The integer ones are in peak_sdot.cpp and peak_smmla.cpp, built with
// their flags.
#include <arm_neon.h>

#include <cstdint>

#include "calibrate/peak_chains.hpp"

namespace trillion {
namespace {

// 16 chains: 4 FMA pipes x 4 cycles (Apple's performance cores) need 16; 32 registers hold them.
float32x4_t fmla(float32x4_t a) { return vfmaq_f32(vdupq_n_f32(1e-7f), a, vdupq_n_f32(0.999999f)); }

}  // namespace

PeakLoop peak_fmla() { return peak_loop<AccumulatorChains<fmla, float, 16>>(); }

}  // namespace trillion
