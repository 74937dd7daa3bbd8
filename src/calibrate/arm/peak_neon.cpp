// NEON peak probe (peak_probe.hpp): FP32 FMA on 4 lanes (fmla), every arm64
// CPU. The integer ones are in peak_sdot.cpp and peak_smmla.cpp, built with
// their flags.
#include <arm_neon.h>

#include "calibrate/peak_chains.hpp"

namespace trillion {
namespace {

// 16 chains: 4 FMA pipes x 4 cycles (Apple's performance cores) need 16; 32 registers hold them.
struct Fmla : NoOperands {
  using V = float32x4_t;
  static constexpr int kChains = 16;
  static V init(int k) { return vdupq_n_f32(1.0f + float(k) * 1e-3f); }
  static V step(V a, const Operands&, int) { return vfmaq_f32(vdupq_n_f32(1e-7f), a, vdupq_n_f32(0.999999f)); }
  static double fold(V a) { return vgetq_lane_f32(a, 0); }
};

}  // namespace

PeakLoop peak_fmla() { return peak_loop<Fmla>(); }

}  // namespace trillion
