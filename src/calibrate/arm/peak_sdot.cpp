// The NEON integer path's int8 dot product (peak_probe.hpp): SDOT, 16
// multiply-adds of signed bytes into 4 int32 lanes (matmul_q8_sdot.cpp).
// Built with +dotprod; run only where the CPU has it.
#include <arm_neon.h>

#include "calibrate/peak_chains.hpp"

namespace trillion {
namespace {

struct Sdot : NoOperands {
  using V = int32x4_t;
  static constexpr int kChains = 16;
  static V init(int k) { return vdupq_n_s32(k); }
  static V step(V a, const Operands&, int) { return vdotq_s32(a, vdupq_n_s8(3), vdupq_n_s8(-5)); }
  static double fold(V a) { return double(vgetq_lane_s32(a, 0)); }
};

}  // namespace

PeakLoop peak_sdot() { return peak_loop<Sdot>(); }

}  // namespace trillion
