#include "parallel/local_runner.hpp"

#include <chrono>

#include "parallel/head_step.hpp"

namespace trillion {

namespace {
LayerRange whole_model(const ModelConfig& cfg) {
  return LayerRange{0, cfg.num_hidden_layers, true, true};
}
}  // namespace

LocalRunner::LocalRunner(const ModelConfig& cfg, TensorSource& source, ThreadPool& pool,
                         int32_t slots, int32_t max_len, int64_t kv_tokens, Activations act, bool speculative)
    : cfg_(cfg),
      model_(cfg, whole_model(cfg), source, pool, nullptr, act),
      cache_(cfg, whole_model(cfg), slots, max_len, kv_tokens) {
  if (speculative) {
    RunShape shape;
    shape.max_len = max_len;
    shape.kv_tokens = kv_tokens;
    shape.activations = act;
    spec_ = std::make_unique<Speculator>(cfg, source, pool, shape, slots);
  }
}

void LocalRunner::submit(uint64_t ticket, const StepInput& in) {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t n = in.batch.size(), d = cfg_.hidden_size;
  x_.resize(size_t(n * d));
  model_.embed(in.tokens.data(), n, x_.data());
  model_.forward(in.batch, x_.data(), cache_);
  StepOutput out = head_step(model_, x_.data(), in, spec_.get());
  out.ticket = ticket;
  done_.push_back(std::move(out));
  busy_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

StepOutput LocalRunner::next() {
  StepOutput out = std::move(done_.front());
  done_.pop_front();
  return out;
}

}  // namespace trillion
