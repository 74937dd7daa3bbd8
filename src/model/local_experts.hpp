// Routed experts computed on this rank. A step's tokens are grouped by expert
// so each chosen expert's weights stream once per step: one matmul over its
// tokens, whose rows are bit-identical to one-token runs (kernel contract).
#pragma once
#include <cstdint>
#include <vector>

#include "common/tensor_view.hpp"
#include "common/thread_pool.hpp"
#include "config/model_config.hpp"
#include "model/expert_backend.hpp"
#include "config/expert_range.hpp"
#include "config/layer_range.hpp"
#include "model/linear.hpp"
#include "model/weights.hpp"

namespace trillion {

class LocalExperts : public ExpertBackend {
 public:
  // All routed experts of the MoE layers in `range`.
  LocalExperts(const ModelConfig& cfg, const LayerRange& range, TensorSource& source, ThreadPool& pool,
               Activations act = Activations::f32);
  // Experts [experts.begin, experts.end) of each MoE layer in `range` (expert parallel).
  LocalExperts(const ModelConfig& cfg, const LayerRange& range, TensorSource& source, ThreadPool& pool,
               ExpertRange experts, Activations act = Activations::f32);

  bool holds(int64_t layer, int64_t expert) const;

  // Throws Error when a requested (layer, expert) is not held here.
  void run(const ExpertRequest& req) override;

 private:
  const ModelConfig& cfg_;
  LayerRange range_;
  ExpertRange span_;  // the experts held
  ThreadPool& pool_;
  Activations act_;  // the experts' compute path (linear.hpp)
  std::vector<std::vector<MlpWeights>> experts_;  // [range.size()][span size]; empty for dense layers
};

}  // namespace trillion
