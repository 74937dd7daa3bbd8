#include "model/mlp.hpp"

#include <vector>

#include "kernels/vector_ops.hpp"

namespace trillion {

void mlp_forward(const MlpWeights& w, const float* x, int64_t n, float* y, Activations act, ThreadPool& pool) {
  const int64_t width = w.gate.rows;
  std::vector<float> gate(size_t(n * width)), up(size_t(n * width));  // [n, width]
  linear_pair(w.gate, gate.data(), w.up, up.data(), x, n, act, &pool);
  swiglu(gate.data(), up.data(), n * width, gate.data());  // h = silu(gate) * up
  linear(w.down, gate.data(), n, y, act, pool);
}

void mlp_forward_serial(const MlpWeights& w, const float* x, int64_t n, float* y, Activations act) {
  const int64_t width = w.gate.rows;
  std::vector<float> gate(size_t(n * width)), up(size_t(n * width));  // [n, width]
  linear_pair(w.gate, gate.data(), w.up, up.data(), x, n, act, nullptr);
  swiglu(gate.data(), up.data(), n * width, gate.data());
  linear_serial(w.down, gate.data(), n, y, w.down.rows, act);
}

}  // namespace trillion
