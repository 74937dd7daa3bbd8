// A weight matrix in its stored format, used in place. Kernels know nothing
// of the model: they see only this. y = W x with W row-major [rows, cols].
#pragma once
#include <cstdint>

namespace trillion {

enum class MatFormat : uint8_t {
  F32,       // data: float[rows*cols]
  BF16,      // data: uint16 bf16[rows*cols]
  FP8_B128,  // data: uint8 e4m3fn[rows*cols]; scale: float[ceil(R/128)][scale_cols],
             //   W[r][c] = e4m3(data) * scale[(scale_row0 + r)/128][c/128]
  INT4_G32,  // data: uint32[rows*cols/8], 8 values per word, value j of a word at bits 4j..4j+3,
             //   stored as q+8 (q in [-8,7]); scale: uint16 bf16[rows][scale_cols],
             //   W[r][c] = (nibble - 8) * bf16(scale[r][c/32]); cols % 32 == 0
  INT8_G32,  // data: int8 q[rows*cols] (q in [-127, 127]); scale: uint16 bf16[rows][scale_cols],
             //   scale_cols >= ceil(cols/32), W[r][c] = q * bf16(scale[r][c/32]); any cols
             //   (the last group may be partial). `trillion convert --quantize int8`.
};

struct QMatrix {
  MatFormat format = MatFormat::F32;
  int64_t rows = 0;
  int64_t cols = 0;
  const void* data = nullptr;
  const void* scale = nullptr;
  int64_t scale_cols = 0;   // row stride of `scale`, in elements
  int64_t scale_row0 = 0;   // FP8: global row of row 0 (block index = (scale_row0 + r) / 128)

  // Rows [r0, r0 + n) as a matrix of their own; scale lookups stay aligned.
  QMatrix row_range(int64_t r0, int64_t n) const;
};

// Bytes of weights (data + scales) a product with W streams; for bandwidth figures.
int64_t qmatrix_bytes(const QMatrix& W);

// Throws Error when W cannot be used (null data/scale, INT4 cols % 32, FP8 scale_row0).
void check_qmatrix(const QMatrix& W);

}  // namespace trillion
