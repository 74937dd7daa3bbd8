// NEON integer-dot product with SDOT (ARMv8.2 dotprod: Apple M1 and later,
// Neoverse). Built with that flag; runs only after the CPU reports the feature
// (matmul_q8_neon.cpp).
#include "kernels/arm/q8_neon_tile.hpp"

namespace trillion::neon {

void matmul_q8_rows_sdot(const QMatrix& W, const Q8Rows& xq, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  matmul_q8_rows_with<SdotSum>(W, xq, y, ldy, r0, r1);
}

}  // namespace trillion::neon
