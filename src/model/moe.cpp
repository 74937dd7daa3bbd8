#include "model/moe.hpp"

#include <algorithm>
#include <vector>

#include "kernels/matmul.hpp"
#include "kernels/vector_ops.hpp"
#include "model/mlp.hpp"
#include "model/routing.hpp"

namespace trillion {

void moe_begin(const ModelConfig& cfg, const MoeWeights& w, int64_t layer, const Step& step,
               ExpertBackend& experts, const float* x, MoeInFlight& f, int group, uint64_t groups_with_rows) {
  const int64_t n = step.n(), d = cfg.hidden_size, E = cfg.n_routed_experts, k = cfg.num_experts_per_tok;

  std::vector<float> scores(size_t(n * E));  // [n, E] sigmoid(x . Wgate^T)
  f.ids.assign(size_t(n * k), 0);
  f.weights.assign(size_t(n * k), 0.0f);
  {
    const PhaseScope timed(step.times, Phase::router);
    // The router stays exact on every path: a quantized score could flip an
    // expert choice, a discrete change no tolerance covers.
    matmul(w.gate, x, n, scores.data(), step.pool);
    sigmoid_each(scores.data(), n * E);
    for (int64_t t = 0; t < n; ++t)
      route_token(cfg, &scores[size_t(t * E)], w.bias, &f.ids[size_t(t * k)], &f.weights[size_t(t * k)]);
  }
  step.dump.dump(layer, "router_scores", scores.data(), {n, E});
  step.dump.dump(layer, "router_weights", f.weights.data(), {n, k});
  if (step.dump.enabled()) {
    std::vector<float> idf(f.ids.begin(), f.ids.end());
    step.dump.dump(layer, "router_ids", idf.data(), {n, k});
  }
  f.routed.assign(size_t(n * k * d), 0.0f);
  ExpertRequest req{layer, n, k, d, x, f.ids.data(), f.routed.data(), group, groups_with_rows};
  f.shared_done = false;
  if (w.has_shared) {  // offered to the backend: it may run it with the routed experts
    f.shared.resize(size_t(n * d));
    req.shared = &w.shared, req.shared_out = f.shared.data(), req.shared_done = &f.shared_done;
  }
  const PhaseScope timed(step.times, Phase::experts);
  experts.begin(req);
}

void moe_end(const ModelConfig& cfg, const MoeWeights& w, int64_t layer, const Step& step, MoeInFlight& f,
             const float* x, float* y) {
  const int64_t n = step.n(), d = cfg.hidden_size, k = cfg.num_experts_per_tok;
  std::fill_n(y, n * d, 0.0f);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < k; ++j) axpy(f.weights[size_t(t * k + j)], &f.routed[size_t((t * k + j) * d)], y + t * d, d);
  step.dump.dump(layer, "moe_routed", y, {n, d});
  if (w.has_shared) {
    if (!f.shared_done) {
      const PhaseScope timed(step.times, Phase::experts);
      mlp_forward(w.shared, x, n, f.shared.data(), step.act, step.pool);
    }
    step.dump.dump(layer, "moe_shared", f.shared.data(), {n, d});
    add(y, f.shared.data(), n * d);
  }
}

void moe_forward(const ModelConfig& cfg, const MoeWeights& w, int64_t layer, const Step& step,
                 ExpertBackend& experts, const float* x, float* y) {
  // The calling thread's, reused from layer to layer (moe_begin sizes and
  // fills every part): a 512-token prefill's routed outputs are 32 MiB on
  // the bench model (n x top-k x d floats), at the allocator's mmap
  // threshold, and when the heap's free top was smaller a fresh buffer per
  // layer was a fresh mapping whose pages all faulted in (a 512-token
  // prefill then spent a large part of its time in page faults and their
  // zero fill, depending on where unrelated allocations left the heap's top).
  // The largest a step has needed stays allocated, as the heap keeps
  // smaller freed blocks (platform/allocator.hpp): a step's peak is unchanged.
  thread_local MoeInFlight f;
  moe_begin(cfg, w, layer, step, experts, x, f);
  {
    const PhaseScope timed(step.times, Phase::experts);
    experts.serve();
    experts.end();
  }
  moe_end(cfg, w, layer, step, f, x, y);
}

}  // namespace trillion
