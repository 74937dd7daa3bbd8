// Checks of exp_f32 (kernels/expf.hpp) and of every path's vectorized exp,
// shared by test_vector_ops.cpp and kernel_selftest (which runs on the arm64
// build under qemu). Each returns "" or what went wrong (the first misses and
// how many).
#pragma once
#include <cstdint>
#include <string>

#include "kernels/isa.hpp"

namespace trillion::test {

// exp_f32 against exp in double rounded to float: within one unit in the
// last place for results in the normal range (glibc's expf: 0.502 ULP),
// exact special cases (0, infinities, NaN, overflow, underflow). Every
// `stride`-th float bit pattern, plus the boundaries.
std::string exp_accuracy_misses(uint32_t stride);

// The path's exp_each against exp_f32, bit for bit, over the same floats, in
// calls of every length 1..19 at every offset (vector steps, tails, masked
// steps, steps with one lane out of the fast range).
std::string exp_path_misses(KernelIsa isa, uint32_t stride);

// Whether this process's std::exp(float) is the computation exp_f32 follows
// (glibc on x86-64 picks its FMA build on CPUs with FMA and AVX2), with why
// when it is not; exp_libm_misses then compares the two bit for bit.
bool libm_expf_is_glibc_fma(std::string& why_not);
std::string exp_libm_misses(uint32_t stride);

}  // namespace trillion::test
