// SwiGLU MLP: dense layers, shared experts, each routed expert.
#pragma once
#include <cstdint>

#include "common/thread_pool.hpp"
#include "model/linear.hpp"
#include "model/weights.hpp"

namespace trillion {

// y[n, d] = down(silu(gate x) * up x) for x[n, d]. Rows are independent: a
// token's output does not depend on the other rows (kernel contract).
void mlp_forward(const MlpWeights& w, const float* x, int64_t n, float* y, Activations act, ThreadPool& pool);

// The same on the calling thread (same bits), for callers that split work
// themselves, e.g. one expert per thread.
void mlp_forward_serial(const MlpWeights& w, const float* x, int64_t n, float* y, Activations act);
// mlp_forward_serial with x already quantized for gate and up (only when
// pair_uses_int8(w.gate, w.up, act); see linear_pair_q8): the same bits.
void mlp_forward_serial_q8(const MlpWeights& w, const Q8Rows& xq, float* y, Activations act);

}  // namespace trillion
