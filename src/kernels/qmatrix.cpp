#include "kernels/qmatrix.hpp"

#include <string>

#include "common/error.hpp"

namespace trillion {
namespace {

std::string shape_of(const QMatrix& W) {
  return "[" + std::to_string(W.rows) + ", " + std::to_string(W.cols) + "]";
}

}  // namespace

QMatrix QMatrix::row_range(int64_t r0, int64_t n) const {
  if (r0 < 0 || n < 0 || r0 + n > rows)
    throw Error("QMatrix::row_range(" + std::to_string(r0) + ", " + std::to_string(n) +
                ") outside " + shape_of(*this));
  QMatrix m = *this;
  m.rows = n;
  switch (format) {
    case MatFormat::F32: m.data = static_cast<const float*>(data) + r0 * cols; break;
    case MatFormat::BF16: m.data = static_cast<const uint16_t*>(data) + r0 * cols; break;
    case MatFormat::FP8_B128:
      m.data = static_cast<const uint8_t*>(data) + r0 * cols;
      m.scale_row0 = scale_row0 + r0;  // same scale table, block index shifts
      break;
    case MatFormat::INT4_G32:
      m.data = static_cast<const uint32_t*>(data) + r0 * (cols / 8);
      m.scale = static_cast<const uint16_t*>(scale) + r0 * scale_cols;
      break;
    case MatFormat::INT8_G32:
      m.data = static_cast<const int8_t*>(data) + r0 * cols;
      m.scale = static_cast<const uint16_t*>(scale) + r0 * scale_cols;
      break;
  }
  return m;
}

int64_t qmatrix_bytes(const QMatrix& W) {
  const int64_t n = W.rows * W.cols;
  switch (W.format) {
    case MatFormat::F32: return 4 * n;
    case MatFormat::BF16: return 2 * n;
    case MatFormat::FP8_B128: return n + 4 * ((W.rows + 127) / 128) * ((W.cols + 127) / 128);
    case MatFormat::INT4_G32: return n / 2 + 2 * W.rows * (W.cols / 32);
    case MatFormat::INT8_G32: return n + 2 * W.rows * ((W.cols + 31) / 32);
  }
  return 0;
}

void check_qmatrix(const QMatrix& W) {
  auto fail = [&](const std::string& what) { throw Error("QMatrix " + shape_of(W) + ": " + what); };
  if (W.rows < 0 || W.cols < 0) fail("negative shape");
  if (W.rows * W.cols > 0 && !W.data) fail("no data");
  if (W.format == MatFormat::FP8_B128) {
    if (!W.scale && W.rows > 0) fail("FP8 without block scales");
    if (W.scale_cols < (W.cols + 127) / 128) fail("FP8 scale_cols too small");
    if (W.scale_row0 < 0) fail("negative scale_row0");
  }
  if (W.format == MatFormat::INT4_G32) {
    if (W.cols % 32) fail("INT4 needs cols % 32 == 0");
    if (!W.scale && W.rows > 0) fail("INT4 without group scales");
    if (W.scale_cols < W.cols / 32) fail("INT4 scale_cols too small");
  }
  if (W.format == MatFormat::INT8_G32) {
    if (!W.scale && W.rows > 0) fail("INT8 without group scales");
    if (W.scale_cols < (W.cols + 31) / 32) fail("INT8 scale_cols too small");
  }
}

}  // namespace trillion
