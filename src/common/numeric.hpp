// Scalar conversions between the storage formats and float32.
// These are the reference definitions; SIMD kernels must agree with them bit for bit.
#pragma once
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>

namespace trillion {

// bfloat16 is the upper half of a float32.
inline float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

// Round to nearest even; NaN stays NaN (quiet).
inline uint16_t f32_to_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

// FP8 E4M3 "fn" variant (as in torch.float8_e4m3fn / DeepSeek-V3): bias 7,
// no infinities, 0x7f and 0xff are NaN, max finite 448.
constexpr float fp8e4m3_to_f32_scalar(uint8_t v) {
  const int sign = v >> 7, exp = (v >> 3) & 0xf, man = v & 0x7;
  float mag = 0.0f;
  if (exp == 0xf && man == 0x7) {
    mag = __builtin_nanf("");
  } else if (exp == 0) {
    mag = float(man) / 8.0f / 64.0f;  // subnormal: man * 2^-9
  } else {
    mag = (1.0f + float(man) / 8.0f);
    int e = exp - 7;
    while (e > 0) { mag *= 2.0f; --e; }
    while (e < 0) { mag /= 2.0f; ++e; }
  }
  return sign ? -mag : mag;
}

// 256-entry decode table, built at compile time.
inline const std::array<float, 256>& fp8e4m3_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i) t[size_t(i)] = fp8e4m3_to_f32_scalar(uint8_t(i));
    return t;
  }();
  return table;
}

inline float fp8e4m3_to_f32(uint8_t v) { return fp8e4m3_table()[v]; }

}  // namespace trillion
