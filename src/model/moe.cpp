#include "model/moe.hpp"

#include <algorithm>
#include <vector>

#include "kernels/matmul.hpp"
#include "kernels/vector_ops.hpp"
#include "model/mlp.hpp"
#include "model/routing.hpp"

namespace trillion {

void moe_forward(const ModelConfig& cfg, const MoeWeights& w, int64_t layer, const Step& step,
                 ExpertBackend& experts, const float* x, float* y) {
  const int64_t n = step.n(), d = cfg.hidden_size, E = cfg.n_routed_experts, k = cfg.num_experts_per_tok;

  std::vector<float> scores(size_t(n * E));  // [n, E] sigmoid(x . Wgate^T)
  // The router stays exact on every path: a quantized score could flip an
  // expert choice, a discrete change no tolerance covers.
  matmul(w.gate, x, n, scores.data(), step.pool);
  for (float& s : scores) s = sigmoid(s);
  std::vector<int32_t> ids(size_t(n * k));   // [n, k] chosen experts, top-k order
  std::vector<float> weights(size_t(n * k)); // [n, k] combine weights
  for (int64_t t = 0; t < n; ++t) route_token(cfg, &scores[size_t(t * E)], w.bias, &ids[size_t(t * k)], &weights[size_t(t * k)]);
  step.dump.dump(layer, "router_scores", scores.data(), {n, E});
  step.dump.dump(layer, "router_weights", weights.data(), {n, k});
  if (step.dump.enabled()) {
    std::vector<float> idf(ids.begin(), ids.end());
    step.dump.dump(layer, "router_ids", idf.data(), {n, k});
  }

  std::vector<float> routed(size_t(n * k * d));  // [n, k, d] unweighted expert outputs
  experts.run(ExpertRequest{layer, n, k, d, x, ids.data(), routed.data()});

  std::fill_n(y, n * d, 0.0f);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < k; ++j) axpy(weights[size_t(t * k + j)], &routed[size_t((t * k + j) * d)], y + t * d, d);
  step.dump.dump(layer, "moe_routed", y, {n, d});
  if (w.has_shared) {
    std::vector<float> shared(size_t(n * d));  // [n, d]
    mlp_forward(w.shared, x, n, shared.data(), step.act, step.pool);
    step.dump.dump(layer, "moe_shared", shared.data(), {n, d});
    add(y, shared.data(), n * d);
  }
}

}  // namespace trillion
