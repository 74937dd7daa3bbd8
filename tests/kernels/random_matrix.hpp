// Random weight matrices in each stored format, owning their bytes, with the
// exact float64 value of every element (the oracle of the kernel tests).
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/qmatrix.hpp"

namespace trillion::test {

struct RandomMatrix {
  MatFormat format;
  int64_t rows, cols;
  std::vector<uint8_t> data;   // stored bytes
  std::vector<uint8_t> scale;  // FP8: float [ceil(rows/128), ceil(cols/128)]; INT4: bf16 [rows, cols/32]
  int64_t scale_cols = 0;

  RandomMatrix(MatFormat format, int64_t rows, int64_t cols, uint64_t seed);
  // FP8_B128 with block scales taken from `scales` in turn (to reach scales
  // past 2^8 or near 2^-120) and, with `nan_codes`, NaN bytes among the values.
  static RandomMatrix fp8(int64_t rows, int64_t cols, uint64_t seed, const std::vector<float>& scales,
                          bool nan_codes = false);
  QMatrix view() const;
  double value(int64_t r, int64_t c) const;  // exact W[r][c]
  // INT4_G32 / INT8_G32: the integer q of W[r][c] and the scale of its group g.
  int32_t qvalue(int64_t r, int64_t c) const;
  float qscale(int64_t r, int64_t g) const;
};

std::vector<float> random_floats(int64_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f);

// y[n, rows] = x . W^T in float64, and s[n, rows] = sum_c |W[r][c] x[t][c]|
// (the scale of the rounding error bounds).
void matmul_f64(const RandomMatrix& W, const std::vector<float>& x, int64_t n, std::vector<double>& y,
                std::vector<double>& s);
// y[n, cols] = x . W in float64, and the matching s.
void matmul_t_f64(const RandomMatrix& W, const std::vector<float>& x, int64_t n, std::vector<double>& y,
                  std::vector<double>& s);

const char* format_name(MatFormat f);

}  // namespace trillion::test
