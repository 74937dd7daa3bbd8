// StepRunner for one rank holding the whole model (the trivial layout):
// steps run at submit().
#pragma once
#include <deque>
#include <memory>
#include <vector>

#include "model/kv_cache.hpp"
#include "model/transformer.hpp"
#include "parallel/speculator.hpp"
#include "parallel/step_runner.hpp"

namespace trillion {

class LocalRunner : public StepRunner {
 public:
  // kv_tokens: positions of the KV-cache pool (0: slots x max_len); act: the compute path.
  LocalRunner(const ModelConfig& cfg, TensorSource& source, ThreadPool& pool, int32_t slots,
              int32_t max_len, int64_t kv_tokens = 0, Activations act = Activations::f32,
              bool speculative = false);
  int64_t vocab_size() const override { return cfg_.vocab_size; }
  int32_t slots() const override { return cache_.slots(); }
  int32_t max_len() const override { return cache_.max_len(); }
  KvPools kv_pools() const override { return KvPools(1, cache_.blocks()); }
  void submit(uint64_t ticket, const StepInput& in) override;
  StepOutput next() override;
  double busy_seconds() const { return busy_; }
  int64_t kv_cache_bytes() const { return cache_.bytes() + (spec_ ? spec_->kv_cache_bytes() : 0); }

 private:
  const ModelConfig& cfg_;
  Transformer model_;
  KvCache cache_;
  std::unique_ptr<Speculator> spec_;  // --speculative mtp
  std::vector<float> x_;     // [n, hidden] activations of the step
  std::deque<StepOutput> done_;
  double busy_ = 0;  // seconds computing steps
};

}  // namespace trillion
