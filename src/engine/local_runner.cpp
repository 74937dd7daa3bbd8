#include "engine/local_runner.hpp"

#include <chrono>
#include <cstring>

#include "engine/sampler.hpp"

namespace trillion {

StepOutput finish_step(const Transformer& model, const float* x, const StepInput& in) {
  const int64_t d = model.config().hidden_size, vocab = model.config().vocab_size;
  const int64_t m = int64_t(in.logit_rows.size());
  // Only the requested rows go through the (vocabulary-sized) head.
  std::vector<float> rows(size_t(m * d));
  for (int64_t i = 0; i < m; ++i)
    std::memcpy(&rows[size_t(i * d)], x + in.logit_rows[size_t(i)] * d, size_t(d) * sizeof(float));
  StepOutput out;
  out.logits.resize(size_t(m * vocab));
  model.logits(rows.data(), m, out.logits.data());
  out.tokens.resize(size_t(m));
  out.logprobs.assign(size_t(m), 0.0f);
  out.top_logprobs.resize(size_t(m));
  for (int64_t i = 0; i < m; ++i) {
    const SamplingParams p = in.sampling.empty() ? SamplingParams{} : in.sampling.at(size_t(i));
    Sample s = sample_token(&out.logits[size_t(i * vocab)], vocab, p);
    out.tokens[size_t(i)] = s.token;
    out.logprobs[size_t(i)] = s.logprob;
    out.top_logprobs[size_t(i)] = std::move(s.top);
  }
  if (!in.return_logits) {
    out.logits.clear();
    out.logits.shrink_to_fit();
  }
  return out;
}

namespace {
LayerRange whole_model(const ModelConfig& cfg) {
  return LayerRange{0, cfg.num_hidden_layers, true, true};
}
}  // namespace

LocalRunner::LocalRunner(const ModelConfig& cfg, TensorSource& source, ThreadPool& pool,
                         int32_t slots, int32_t max_len, int64_t kv_tokens)
    : cfg_(cfg),
      model_(cfg, whole_model(cfg), source, pool),
      cache_(cfg, whole_model(cfg), slots, max_len, kv_tokens) {}

void LocalRunner::submit(uint64_t ticket, const StepInput& in) {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t n = in.batch.size(), d = cfg_.hidden_size;
  x_.resize(size_t(n * d));
  model_.embed(in.tokens.data(), n, x_.data());
  model_.forward(in.batch, x_.data(), cache_);
  StepOutput out = finish_step(model_, x_.data(), in);
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
