// The integer-dot path's checks (kernels/matmul_q8.hpp), Boost-free so both
// test_kernels and kernel_selftest (the arm64 test under qemu) run them.
#pragma once
#include <string>
#include <vector>

namespace trillion::test {

// Every available ISA: quantization against hand-computed cases and an
// independent float64 computation; products bit-identical to the portable
// definition and within the rounding bound of an exact-integer float64
// reference; within the quantization bound of the float64 product of the
// unquantized activations; bits independent of n, offsets, row splits and
// threads. Returns one message per failed check (empty: all passed) and
// adds the number of checks run to *checks.
std::vector<std::string> q8_failures(int* checks);

}  // namespace trillion::test
