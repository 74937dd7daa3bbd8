// A mixture-of-experts layer: route, run the chosen experts through the
// ExpertBackend (here or on other ranks), combine in a fixed order.
#pragma once
#include <cstdint>
#include <vector>

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

// moe_forward in two halves, for callers that overlap groups of rows:
// moe_begin routes and hands the chosen experts to experts.begin(); after
// the backend's serve() and end(), moe_end combines. x stays valid between.
struct MoeInFlight {
  std::vector<int32_t> ids;     // [n, k] chosen experts, top-k order
  std::vector<float> weights;   // [n, k] combine weights
  std::vector<float> routed;    // [n, k, d] unweighted expert outputs, written by the backend
  std::vector<float> shared;    // [n, d] the shared expert's output (by the backend when shared_done, else by moe_end)
  bool shared_done = false;
};
void moe_begin(const ModelConfig& cfg, const MoeWeights& w, int64_t layer, const Step& step,
               ExpertBackend& experts, const float* x, MoeInFlight& f, int group = 0, uint64_t groups_with_rows = 1);
void moe_end(const ModelConfig& cfg, const MoeWeights& w, int64_t layer, const Step& step, MoeInFlight& f,
             const float* x, float* y);

}  // namespace trillion
