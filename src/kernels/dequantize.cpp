#include "kernels/decode_scalar.hpp"
#include "kernels/matmul.hpp"

namespace trillion {

void dequantize_row(const QMatrix& W, int64_t r, float* out) {
  check_qmatrix(W);
  detail::with_format(W.format, [&]<MatFormat F>() {
    for (int64_t c = 0; c < W.cols; ++c) out[c] = detail::stored_value<F>(W, r, c) * detail::group_scale<F>(W, r, c);
  });
}

}  // namespace trillion
