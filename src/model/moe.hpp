// A mixture-of-experts layer: route, run the chosen experts through the
// ExpertBackend (here or on other ranks), combine in a fixed order.
#pragma once
#include <cstdint>

#include "config/model_config.hpp"
#include "model/expert_backend.hpp"
#include "model/step.hpp"
#include "model/weights.hpp"

namespace trillion {

// y[n, d] = sum_k w_k expert_{id_k}(x) + shared(x), x[n, d] post-attention-normed.
// The sum runs in top-k order, then the shared expert is added: the same
// order for every token whatever computed the experts.
void moe_forward(const ModelConfig& cfg, const MoeWeights& w, int64_t layer, const Step& step,
                 ExpertBackend& experts, const float* x, float* y);

}  // namespace trillion
