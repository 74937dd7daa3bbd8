// The definitions of the tiled dot/axpy entries (kernel_table.hpp): loops
// over an ISA's own dot and axpy. The portable table uses them as they are; a tiled kernel must give exactly their bits (it
// performs the same operations per output, only sharing the loads).
#pragma once
#include <cstdint>

namespace trillion {

template <class Dot>
inline void dot_tile_loop(Dot dot, const float* a, int64_t lda, int64_t na, const float* b, int64_t ldb, int64_t nb,
                          int64_t n, float* out, int64_t ldo) {
  for (int64_t i = 0; i < na; ++i)
    for (int64_t j = 0; j < nb; ++j) out[i * ldo + j] = dot(a + i * lda, b + j * ldb, n);
}

template <class Axpy>
inline void axpy_tile_loop(Axpy axpy, const float* p, int64_t ldp, int64_t na, const float* x, int64_t ldx,
                           int64_t nb, float* y, int64_t ldy, int64_t n) {
  for (int64_t i = 0; i < na; ++i)
    for (int64_t j = 0; j < nb; ++j) axpy(p[i * ldp + j], x + j * ldx, y + i * ldy, n);
}

}  // namespace trillion
