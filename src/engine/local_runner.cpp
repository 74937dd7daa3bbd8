#include "engine/local_runner.hpp"

#include <cstring>

namespace trillion {

namespace {
LayerRange whole_model(const ModelConfig& cfg) {
  return LayerRange{0, cfg.num_hidden_layers, true, true};
}
}  // namespace

LocalRunner::LocalRunner(const ModelConfig& cfg, TensorSource& source, ThreadPool& pool,
                         int32_t slots, int32_t max_len)
    : cfg_(cfg),
      model_(cfg, whole_model(cfg), source, pool),
      cache_(cfg, whole_model(cfg), slots, max_len) {}

void LocalRunner::step(const StepInput& in, float* logits) {
  const int64_t n = in.batch.size(), d = cfg_.hidden_size;
  x_.resize(size_t(n * d));
  model_.embed(in.tokens.data(), n, x_.data());
  model_.forward(in.batch, x_.data(), cache_);
  // Only the requested rows go through the (vocabulary-sized) head.
  rows_.resize(in.logit_rows.size() * size_t(d));
  for (size_t i = 0; i < in.logit_rows.size(); ++i)
    std::memcpy(&rows_[i * size_t(d)], &x_[size_t(in.logit_rows[i] * d)], size_t(d) * sizeof(float));
  model_.logits(rows_.data(), int64_t(in.logit_rows.size()), logits);
}

}  // namespace trillion
