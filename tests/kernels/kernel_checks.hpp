// What every kernel test checks, in one place for both of them: the Boost
// tests (test_matmul*.cpp, through check_close.hpp) and kernel_selftest,
// which must build without Boost (it is the whole kernel test of the arm64
// build under qemu): the float64 rounding bound, bit identity, the paths this
// CPU has, and the matmul shapes both run.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/isa.hpp"
#include "kernels/qmatrix.hpp"

namespace trillion::test {

// "" when |y[i] - y64[i]| <= (k + 4) u s[i] for every i, u = 2^-24: the
// worst-case bound of a float sum of k products (with one rounding of the
// dequantized weight), s from matmul_f64 / matmul_t_f64. Otherwise the first
// elements outside it and how many there are.
std::string bound_misses(const std::vector<float>& y, const std::vector<double>& y64, const std::vector<double>& s,
                         int64_t k);

bool same_bits(const float* a, const float* b, size_t n);

// The kernel paths this CPU can run, portable first.
std::vector<KernelIsa> available_isas();

struct MatmulShape {
  MatFormat format;
  int64_t rows, cols;
};

// matmul shapes that are not multiples of the SIMD width, the 128-blocks or the tiles.
extern const std::vector<MatmulShape> kMatmulShapes;

}  // namespace trillion::test
