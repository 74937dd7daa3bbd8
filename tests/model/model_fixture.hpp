// A tiny random model behind a Transformer, and helpers to run steps.
#pragma once
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "common/thread_pool.hpp"
#include "model/local_experts.hpp"
#include "model/memory_source.hpp"
#include "model/transformer.hpp"
#include "random_model.hpp"

namespace trillion::test {

struct TinyModel {
  explicit TinyModel(const TinyModelOptions& opt = {}, uint64_t seed = 7)
      : cfg(tiny_config(opt)) {
    fill_random_model(cfg, source, seed);
  }
  ModelConfig cfg;
  MemoryTensorSource source;
};

// Embeds tokens[n], runs the layers on `batch`, returns logits [n, vocab].
inline std::vector<float> run_step(Transformer& model, KvCache& cache, const Batch& batch,
                                   const std::vector<int32_t>& tokens) {
  const int64_t n = batch.size(), d = model.config().hidden_size;
  std::vector<float> x(size_t(n * d)), logits(size_t(n * model.config().vocab_size));
  model.embed(tokens.data(), n, x.data());
  model.forward(batch, x.data(), cache);
  model.logits(x.data(), n, logits.data());
  return logits;
}

inline Batch rows_of(int32_t slot, int32_t pos0, int32_t count) {
  Batch b;
  for (int32_t i = 0; i < count; ++i) b.rows.push_back({slot, pos0 + i});
  return b;
}

// n == 0 compares nothing (and memcmp must not see the null data() of an empty vector).
inline bool same_bits(const float* a, const float* b, size_t n) { return n == 0 || std::memcmp(a, b, n * sizeof(float)) == 0; }

// n token ids in [0, vocab), a fixed stream per seed.
inline std::vector<int32_t> random_tokens(int n, uint64_t seed, int64_t vocab) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& v : t) v = int32_t(rng() % uint64_t(vocab));
  return t;
}

}  // namespace trillion::test
