// The scalar quantization of one activation group (matmul_q8.hpp's
// definition), shared by the portable kernels and the ISA files' partial
// last group. Internal linkage: an ISA-flagged file gets its own copy, so no
// AVX2-compiled body can stand in for the portable one at link time.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace trillion {
namespace {

// Columns [c0, c1) of x (c1 - c0 <= 32) into q[32] (0 past c1); returns d.
[[maybe_unused]] float quantize_q8_group_scalar(const float* x, int64_t c0, int64_t c1, int8_t* q) {
  float amax = 0.0f;
  bool finite = true;
  for (int64_t c = c0; c < c1; ++c) {
    finite = finite && std::isfinite(x[c]);
    amax = std::max(amax, std::fabs(x[c]));
  }
  const float d = finite ? amax / 127.0f : NAN;
  for (int64_t j = 0; j < 32; ++j) {
    const int64_t c = c0 + j;
    // nearbyint rounds half to even in the default rounding mode.
    q[j] = (c < c1 && finite && d > 0.0f) ? int8_t(std::clamp(std::nearbyint(x[c] / d), -127.0f, 127.0f)) : 0;
  }
  return d;
}

}  // namespace
}  // namespace trillion
