// StepRunner for one rank holding the whole model: steps run at submit().
#pragma once
#include <deque>
#include <memory>
#include <vector>

#include "engine/step_runner.hpp"
#include "model/kv_cache.hpp"
#include "model/transformer.hpp"

namespace trillion {

class LocalRunner : public StepRunner {
 public:
  // kv_tokens: positions of the KV-cache pool (0: slots x max_len).
  LocalRunner(const ModelConfig& cfg, TensorSource& source, ThreadPool& pool, int32_t slots,
              int32_t max_len, int64_t kv_tokens = 0);
  int64_t vocab_size() const override { return cfg_.vocab_size; }
  int32_t slots() const override { return cache_.slots(); }
  int32_t max_len() const override { return cache_.max_len(); }
  int32_t kv_block_tokens() const override { return KvCache::kBlockTokens; }
  int64_t kv_pool_blocks() const override { return cache_.blocks(); }
  void submit(uint64_t ticket, const StepInput& in) override;
  StepOutput next() override;
  double busy_seconds() const { return busy_; }
  int64_t kv_cache_bytes() const { return cache_.bytes(); }

 private:
  const ModelConfig& cfg_;
  Transformer model_;
  KvCache cache_;
  std::vector<float> x_;     // [n, hidden] activations of the step
  std::deque<StepOutput> done_;
  double busy_ = 0;  // seconds computing steps
};

// The head of a step on the last stage: logits of the requested rows of
// x[n, hidden] and their tokens, chosen by each row's SamplingParams. Shared by every runner so all layouts
// produce the same bits.
StepOutput finish_step(const Transformer& model, const float* x, const StepInput& in);

}  // namespace trillion
