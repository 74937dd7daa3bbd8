// One converted model's decode and prefill steps for bench_model, with what
// each step touches counted exactly: the weight bytes it streams (every
// dense, attention, shared-expert, router and lm_head matrix once, and each
// routed expert chosen by at least one of its tokens once, seen through a
// counting ExpertBackend) and the FLOP it performs (2 x multiply-adds,
// attention over the cache included).
#pragma once
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench_stats.hpp"
#include "common/thread_pool.hpp"
#include "config/model_config.hpp"
#include "model/batch.hpp"
#include "model/expert_backend.hpp"
#include "model/kv_cache.hpp"
#include "config/layer_range.hpp"
#include "model/linear.hpp"
#include "model/local_experts.hpp"
#include "model/phase_times.hpp"
#include "model/transformer.hpp"
#include "model/weights.hpp"
#include "store/int8_source.hpp"
#include "store/model_store.hpp"

namespace trillion::bench {

inline LayerRange whole_model(const ModelConfig& cfg) { return LayerRange{0, cfg.num_hidden_layers, true, true}; }

// What one step costs, apart from the routed experts and the attention over
// the cache (which depend on the step's tokens).
struct Costs {
  int64_t fixed_bytes = 0;  // every non-routed matrix and norm, once per step (no lm_head)
  int64_t fixed_macs = 0;   // their multiply-adds per token
  int64_t head_bytes = 0;   // final norm + lm_head, per step that asks for logits
  int64_t head_macs = 0;    // per logits row
  int64_t embed_row_bytes = 0;
  std::vector<int64_t> expert_bytes;  // [layer] one routed expert's bytes (0: dense layer)
  int64_t expert_macs = 0;            // one routed expert's multiply-adds per token
};

Costs measure_costs(const ModelConfig& cfg, TensorSource& src);

// Passes requests through, counting per step the distinct experts each MoE
// layer runs (their weights stream once per step), the (token, expert) pairs
// (their FLOP) and the time spent inside the backend.
class CountingExperts : public ExpertBackend {
 public:
  CountingExperts(ExpertBackend& inner, const Costs& costs) : inner_(inner), costs_(costs) {}
  void run(const ExpertRequest& req) override {
    const auto t0 = Clock::now();
    inner_.run(req);
    seconds += since(t0);
    std::vector<int32_t> ids(req.ids, req.ids + req.n * req.top_k);
    std::sort(ids.begin(), ids.end());
    const int64_t distinct = std::unique(ids.begin(), ids.end()) - ids.begin();
    bytes += distinct * costs_.expert_bytes[size_t(req.layer)];
    macs += req.n * req.top_k * costs_.expert_macs;
    experts += distinct;
  }
  void reset() { bytes = macs = experts = 0, seconds = 0; }
  int64_t bytes = 0, macs = 0, experts = 0;
  double seconds = 0;

 private:
  ExpertBackend& inner_;
  const Costs& costs_;
};

// One timed step's figures.
struct StepStats {
  double seconds = 0, expert_seconds = 0, head_seconds = 0, cpu_seconds = 0;
  int64_t tokens = 0, weight_bytes = 0, macs = 0, distinct_experts = 0;
  std::array<double, size_t(Phase::count)> phase_seconds{};  // with --phases
};

class Bench {
 public:
  Bench(const ModelConfig& cfg, TensorSource& src, ThreadPool& pool, Activations act)
      : cfg_(cfg), costs_(measure_costs(cfg, src)),
        local_(cfg, whole_model(cfg), src, pool, act), counting_(local_, costs_),
        model_(cfg, whole_model(cfg), src, pool, &counting_, act) {}

  const Costs& costs() const { return costs_; }
  void time_phases() { model_.time_phases(&phases_); }

  // Runs `batch` with tokens[n]; logits (and the greedy next token, written to
  // next[i]) for the rows listed in `head_rows`.
  StepStats step(const Batch& batch, const std::vector<int32_t>& tokens, KvCache& cache,
                 const std::vector<int64_t>& head_rows, std::vector<int32_t>* next);

 private:
  const ModelConfig& cfg_;
  Costs costs_;
  LocalExperts local_;
  CountingExperts counting_;
  Transformer model_;
  PhaseTimes phases_;
  std::vector<float> x_, rows_, logits_;
};

// A converted model opened as a run opens it, ready to step: FP8 models on
// the int8 path read their linears as int8 groups (app/cluster.cpp).
struct LoadedModel {
  // activations: the --activations flag (auto, f32, int8); copied: the
  // weights read through an ArenaCopy (bench/arena_copy.hpp).
  LoadedModel(const std::string& dir, ThreadPool& pool, const std::string& activations, bool copied = false);
  const ModelConfig& config() const { return store->config(); }

  std::unique_ptr<ModelStore> store;
  Activations act;
  std::unique_ptr<Int8FromFp8Source> int8;
  std::unique_ptr<TensorSource> copy;
  TensorSource* weights;  // the store, or int8 over it, or copy over either
  std::unique_ptr<Bench> bench;
};

// Deterministic prompt tokens (any ids work on random weights).
inline int32_t token_of(int64_t seq, int64_t pos, int64_t vocab) {
  return int32_t((seq * 7919 + pos * 104729 + 1) % vocab);
}

// `seqs` prompts of `len` tokens each in one step: the rows, their tokens, and
// the last row of each sequence (whose logits the engine would sample).
struct Prompts {
  Batch batch;
  std::vector<int32_t> tokens;
  std::vector<int64_t> heads;
};

Prompts prompts(int64_t seqs, int64_t len, int64_t vocab);

}  // namespace trillion::bench
