// The ISA-neutral scalar tail of the row-major matmul (y[t][r] = sum_c
// W[r][c] x[t][c]): columns past the last multiple of 8, summed in order
// and scaled once, as every ISA's row kernel finishes a row
// (x86/matmul_avx2_shared.hpp, arm/matmul_neon.cpp). Internal linkage, as
// matmul_t_tiling.hpp: each ISA file instantiates its own copy with its own
// flags and its own format types.
#pragma once
#include <cstdint>

namespace trillion {
namespace {

// sum over c in [cv, cols) of W[r][c] x[c], in order, times the group
// scale of group0. Not inlined: it runs once per row and output, and kept
// out of line it does not crowd the vector loop's registers.
template <class F>
__attribute__((noinline)) float tail_sum(const F& f, int64_t r, const float* xt, int64_t group0, int64_t cv,
                                         int64_t cols) {
  float s = 0.0f;
  for (int64_t c = cv; c < cols; ++c) s += f.at(r, c) * xt[c];
  return s * f.scale_at(r, group0);
}

}  // namespace
}  // namespace trillion
