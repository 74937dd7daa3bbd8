// NEON integer-dot product with SDOT (ARMv8.2 dotprod: Apple M1 and later,
// Neoverse). The only file built with +dotprod; runs only after the CPU
// reports the feature (matmul_q8_neon.cpp).
#include "kernels/arm/q8_neon_tile.hpp"

namespace trillion::neon {
namespace {
struct SdotSum {
  static int32x4_t sum4(int8x16_t a, int8x16_t b) { return vdotq_s32(vdupq_n_s32(0), a, b); }
  static int32x4_t sum8(int32x4_t init, int8x16_t a0, int8x16_t b0, int8x16_t a1, int8x16_t b1) {
    return vdotq_s32(vdotq_s32(init, a0, b0), a1, b1);
  }
};
}  // namespace

void matmul_q8_rows_sdot(const QMatrix& W, const Q8Rows& xq, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  matmul_q8_rows_with<SdotSum>(W, xq, y, ldy, r0, r1);
}

}  // namespace trillion::neon
