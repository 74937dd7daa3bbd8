// The engine's single-precision exp: glibc's expf algorithm (glibc 2.28 and
// later, from Arm's optimized-routines) as its x86-64 FMA build computes it,
// operation for operation. Why our own: softmax and SwiGLU spend most of
// their time in scalar expf calls (attention at long context, prefill), and
// a vector exp of our own design changed results (a softmax tie row of the
// int8 reference test flipped). This one is vectorized (kernel_table.hpp's
// `exp_each`) with the same bits: on glibc x86-64 with FMA every float gives
// std::exp's bits (checked over all 2^32 floats: test_kernels'
// exp_on_every_float, a documented long run), and every kernel path of every
// platform gives these bits, whatever its libm.
//
// The algorithm: exp(x) = 2^(k/32) 2^(r/32), x 32/ln2 = k + r, |r| <= 1/2;
// 2^(k/32) from a 32-entry table plus k/32 in the exponent field, 2^(r/32)
// by a cubic; all in double, rounded once to float. |x| >= 88 (and NaN,
// infinities) takes glibc's special cases (exp_f32 below).
#pragma once
#include <cstdint>

namespace trillion {

namespace expf_consts {
// tab[i] = bits(2^(i/32)) - (i << 47): adding k << 47 to tab[k % 32] gives
// the bits of 2^(k/32) for any |k| < 150 * 32 (k is two's complement).
inline constexpr uint64_t kTable[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51, 0x3fef72b83c7d517b,
    0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1, 0x3fef06fe0a31b715, 0x3feef1a7373aa9cb,
    0x3feedea64c123422, 0x3feece086061892d, 0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429,
    0x3feea47eb03a5585, 0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d, 0x3feee89f995ad3ad,
    0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069, 0x3fef5818dcfba487, 0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da, 0x3fefd0765b6e4540};
inline constexpr double kInvLn2N = 0x1.71547652b82fep+5;  // 32 / ln 2
inline constexpr double kShift = 0x1.8p+52;               // rounds to an integer in the low bits
inline constexpr double kC0 = 0x1.c6af84b912394p-20, kC1 = 0x1.ebfce50fac4f3p-13, kC2 = 0x1.62e42ff0c52d6p-6;
// Lanes whose |x| bits are above this take exp_f32's special cases (|x| >= 88, NaN, infinities).
inline constexpr uint32_t kLastFastAbsBits = 0x42afffff;
}  // namespace expf_consts

// exp(x) as glibc's expf computes it. The fast path, in this order (each
// fma one rounding, as the FMA build contracts the C source):
//   kd = fma(32/ln2, x, shift); ki = bits(kd); kd -= shift;
//   r = fma(32/ln2, x, -kd); s = double(tab[ki % 32] + (ki << 47));
//   z = fma(C0, r, C1); r2 = r * r; y = fma(C2, r, 1); y = fma(z, r2, y);
//   return float(y * s).
// Built without ISA flags (std::fma is a libm call on x86 then): the vector
// kernels call it only for lanes out of the fast path's range.
float exp_f32(float x);

// y[i] = exp_f32(x[i]) for i < n (y may alias x): the portable table's `exp`.
void exp_f32_each(const float* x, float* y, int64_t n);

}  // namespace trillion
