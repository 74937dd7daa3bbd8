// The integer-dot product on AVX-VNNI (Intel Alder Lake and later, AMD Zen 5):
// vpdpbusd adds four unsigned x signed byte products to each int32 lane in
// one instruction, so a lane's exact sum costs 1 instruction instead of 2
// (INT8) and 2 instead of 4 (INT4, even and odd nibbles) - the same exact
// integers, so the same bits as the AVX2 file (the tiles and every float
// step are matmul_q8_tiles.hpp's). The only file built with -mavxvnni; runs
// only after the CPUID check (cpu_has_avx_vnni).
#include <immintrin.h>

#include "kernels/x86/matmul_q8_tiles.hpp"

namespace trillion::avx2 {
namespace {

struct VnniDot {
  static __m256i int8_lanes(__m256i a, __m256i b) { return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), a, b); }
  static __m256i int4_lanes(__m256i lo, __m256i xe, __m256i hi, __m256i xo, __m256i pc) {
    return _mm256_sub_epi32(_mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), lo, xe), hi, xo), pc);
  }
};

}  // namespace

void matmul_q8_rows_vnni(const QMatrix& W, const Q8Rows& xq, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  matmul_q8_rows_with<VnniDot>(W, xq, y, ldy, r0, r1);
}

}  // namespace trillion::avx2
