// Expert parallel: every rank holds attention, dense layers, shared experts,
// embeddings and head; the routed experts are divided between ranks. Each
// rank serves its own sequences: slot s lives on rank s % N (its KV cache
// there). Rank 0 coordinates: ExpertRunner::submit sends every rank its rows
// of the step, all ranks run the whole model on their rows in lockstep (each
// MoE layer exchanges tokens with the experts' owners through RmaExperts),
// and the results come back to rank 0. One step is in flight at a time.
#pragma once
#include <cstdint>
#include <deque>
#include <memory>

#include "engine/step_runner.hpp"
#include "model/kv_cache.hpp"
#include "model/local_experts.hpp"
#include "model/transformer.hpp"
#include "parallel/pipeline.hpp"
#include "parallel/rank_metrics.hpp"
#include "parallel/rma_experts.hpp"
#include "plan/layout.hpp"
#include "runtime/rma_channel.hpp"

namespace trillion {

class ExpertRank {
 public:
  ExpertRank(RmaChannel& ch, const ModelConfig& cfg, TensorSource& source, ThreadPool& pool, const Layout& layout,
             const RunShape& shape);
  // Ranks > 0: serves steps until rank 0 stops the run.
  void serve();
  RankMetrics metrics() const;

 protected:
  // Runs this rank's rows (global slots) through the whole model.
  StepOutput run_rows(uint64_t ticket, const StepInput& in);

  RmaChannel& ch_;
  const ModelConfig& cfg_;
  ExpertRange experts_;
  LocalExperts local_;
  RmaExperts rma_;
  Transformer model_;
  KvCache cache_;
  double busy_ = 0, wait_ = 0;
};

class ExpertRunner : public StepRunner, public ExpertRank {
 public:
  ExpertRunner(RmaChannel& ch, const ModelConfig& cfg, TensorSource& source, ThreadPool& pool, const Layout& layout,
               const RunShape& shape);
  int64_t vocab_size() const override { return cfg_.vocab_size; }
  int32_t slots() const override { return slots_; }
  int32_t max_len() const override { return cache_.max_len(); }
  // Each rank caches its own slots (s % ranks): one pool per rank. Rank 0's
  // pool is the largest by default, and each rank's pool holds its slots' contexts.
  int32_t kv_block_tokens() const override { return KvCache::kBlockTokens; }
  int64_t kv_pool_blocks() const override { return cache_.blocks(); }
  int32_t kv_pools() const override { return ch_.size(); }
  void submit(uint64_t ticket, const StepInput& in) override;
  StepOutput next() override;
  void stop();

 private:
  int32_t slots_;
  std::deque<StepOutput> results_;
  bool stopped_ = false;
};

}  // namespace trillion
