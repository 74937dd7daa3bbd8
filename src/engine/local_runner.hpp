// StepRunner for one rank holding the whole model.
#pragma once
#include <memory>
#include <vector>

#include "engine/step_runner.hpp"
#include "model/kv_cache.hpp"
#include "model/transformer.hpp"

namespace trillion {

class LocalRunner : public StepRunner {
 public:
  LocalRunner(const ModelConfig& cfg, TensorSource& source, ThreadPool& pool, int32_t slots,
              int32_t max_len);
  int64_t vocab_size() const override { return cfg_.vocab_size; }
  int32_t slots() const override { return cache_.slots(); }
  int32_t max_len() const override { return cache_.max_len(); }
  void step(const StepInput& in, float* logits) override;

 private:
  const ModelConfig& cfg_;
  Transformer model_;
  KvCache cache_;
  std::vector<float> x_;     // [n, hidden] activations of the step
  std::vector<float> rows_;  // [logit_rows, hidden] gathered rows for lm_head
};

}  // namespace trillion
