#include "model/mlp.hpp"

#include <vector>

#include "kernels/matmul_q8.hpp"
#include "kernels/vector_ops.hpp"

namespace trillion {

void mlp_forward(const MlpWeights& w, const float* x, int64_t n, float* y, Activations act, ThreadPool& pool) {
  const int64_t width = w.gate.rows;
  std::vector<float> gate(size_t(n * width)), up(size_t(n * width));  // [n, width]
  linear_pair(w.gate, gate.data(), w.up, up.data(), x, n, act, &pool);
  swiglu(gate.data(), up.data(), n * width, gate.data());  // h = silu(gate) * up
  linear(w.down, gate.data(), n, y, act, pool);
}

namespace {
// silu(gate) * up, then down, on the calling thread: the serial forms' second half.
void swiglu_down_serial(const MlpWeights& w, std::vector<float>& gate, const std::vector<float>& up, int64_t n,
                        float* y, Activations act) {
  swiglu(gate.data(), up.data(), int64_t(gate.size()), gate.data());
  linear_serial(w.down, gate.data(), n, y, w.down.rows, act);
}
}  // namespace

void mlp_forward_serial(const MlpWeights& w, const float* x, int64_t n, float* y, Activations act) {
  std::vector<float> gate(size_t(n * w.gate.rows)), up(gate.size());  // [n, width]
  linear_pair(w.gate, gate.data(), w.up, up.data(), x, n, act, nullptr);
  swiglu_down_serial(w, gate, up, n, y, act);
}

void mlp_forward_serial_q8(const MlpWeights& w, const Q8Rows& xq, float* y, Activations act) {
  std::vector<float> gate(size_t(xq.n * w.gate.rows)), up(gate.size());  // [n, width]
  linear_pair_q8(w.gate, gate.data(), w.up, up.data(), xq, nullptr);
  swiglu_down_serial(w, gate, up, xq.n, y, act);
}

}  // namespace trillion
