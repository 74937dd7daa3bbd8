// Checks of the bf16 path (kernels/matmul_bf16.hpp) shared by the Boost test
// (test_matmul_bf16.cpp) and the Boost-free self test run under qemu
// (kernel_selftest.cpp). Each returns its failures, described; empty: passed.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace trillion::test {

// Arm's BF16 step (kernels/bf16_arm_step.hpp) on hand-computed cases:
// rounding to odd, flushing, overflow to infinity, the default NaN.
std::vector<std::string> arm_step_by_hand();

// BFMMLA, as this CPU runs it, against arm_bf16::step bit for bit on random
// and edge operands. Sets `ran` false where there is no BFMMLA (not arm64,
// or no FEAT_BF16).
std::vector<std::string> bfmmla_against_step(bool& ran);

// matmul_bf16 (the build's native kernel where the CPU has it) against the
// build's scalar definition, bit for bit: odd shapes, partial chunks,
// every token count to `most_tokens` against all at once, 1-4 threads,
// scales past 2^8 and near 2^-120, the NaN codes, products and sums below
// the smallest normal, two row blocks of scales.
std::vector<std::string> bf16_kernel_against_definition(int64_t most_tokens);

}  // namespace trillion::test
