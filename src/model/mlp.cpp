#include "model/mlp.hpp"

#include <vector>

#include "kernels/matmul.hpp"
#include "kernels/vector_ops.hpp"

namespace trillion {

void mlp_forward(const MlpWeights& w, const float* x, int64_t n, float* y, ThreadPool& pool) {
  const int64_t width = w.gate.rows;
  std::vector<float> gate(size_t(n * width)), up(size_t(n * width));  // [n, width]
  matmul(w.gate, x, n, gate.data(), pool);
  matmul(w.up, x, n, up.data(), pool);
  swiglu(gate.data(), up.data(), n * width, gate.data());  // h = silu(gate) * up
  matmul(w.down, gate.data(), n, y, pool);
}

void mlp_forward_serial(const MlpWeights& w, const float* x, int64_t n, float* y) {
  const int64_t width = w.gate.rows;
  std::vector<float> gate(size_t(n * width)), up(size_t(n * width));  // [n, width]
  matmul_serial(w.gate, x, n, gate.data(), width);
  matmul_serial(w.up, x, n, up.data(), width);
  swiglu(gate.data(), up.data(), n * width, gate.data());
  matmul_serial(w.down, gate.data(), n, y, w.down.rows);
}

}  // namespace trillion
