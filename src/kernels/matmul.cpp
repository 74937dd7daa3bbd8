// Drivers: split outputs over threads and call the process's kernel table.
#include "kernels/matmul.hpp"

#include <algorithm>

#include "kernels/kernel_table.hpp"

namespace trillion {
namespace {

constexpr int64_t kRowTile = 4;       // rows per work unit (any split gives the same bits)
constexpr int64_t kColTile = 32;      // matmul_t columns per unit: keeps scale groups whole
constexpr int64_t kMinWork = 1 << 16; // multiply-adds per thread chunk worth a wake-up

int64_t grain_for(int64_t unit_work) { return std::max<int64_t>(1, kMinWork / std::max<int64_t>(1, unit_work)); }

}  // namespace

void matmul_serial(const QMatrix& W, const float* x, int64_t n, float* y, int64_t ldy) {
  check_qmatrix(W);
  active_kernel_table().matmul_rows(W, x, n, y, ldy, 0, W.rows);
}

void matmul(const QMatrix& W, const float* x, int64_t n, float* y, ThreadPool& pool) {
  check_qmatrix(W);
  const KernelTable& k = active_kernel_table();
  const int64_t units = (W.rows + kRowTile - 1) / kRowTile;
  pool.parallel_for(units, grain_for(kRowTile * W.cols * n), [&](int64_t b, int64_t e) {
    k.matmul_rows(W, x, n, y, W.rows, b * kRowTile, std::min(W.rows, e * kRowTile));
  });
}

void matmul_t_serial(const QMatrix& W, const float* x, int64_t n, float* y) {
  check_qmatrix(W);
  active_kernel_table().matmul_t_cols(W, x, n, y, 0, W.cols);
}

void matmul_t(const QMatrix& W, const float* x, int64_t n, float* y, ThreadPool& pool) {
  check_qmatrix(W);
  const KernelTable& k = active_kernel_table();
  const int64_t units = (W.cols + kColTile - 1) / kColTile;
  pool.parallel_for(units, grain_for(kColTile * W.rows * n), [&](int64_t b, int64_t e) {
    k.matmul_t_cols(W, x, n, y, b * kColTile, std::min(W.cols, e * kColTile));
  });
}

}  // namespace trillion
