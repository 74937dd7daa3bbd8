// Expert parallel: every rank holds attention, dense layers, shared experts,
// embeddings and head; the routed experts are divided between ranks. Each
// rank serves its own sequences: slot s lives on rank s % N, as its local
// slot s / N (KvPools: one pool per rank). Rank 0 coordinates: ExpertRunner::submit sends every rank its rows
// of the step, all ranks run the whole model on their rows in lockstep (each
// MoE layer exchanges tokens with the experts' owners through RmaExperts),
// and the results come back to rank 0. One step is in flight at a time.
#pragma once
#include <cstdint>
#include <deque>
#include <memory>

#include "model/kv_cache.hpp"
#include "model/local_experts.hpp"
#include "model/transformer.hpp"
#include "model/kv_pools.hpp"
#include "parallel/rank_metrics.hpp"
#include "parallel/rma_experts.hpp"
#include "parallel/run_shape.hpp"
#include "parallel/speculator.hpp"
#include "parallel/step_runner.hpp"
#include "plan/layout.hpp"
#include "runtime/rma_channel.hpp"

namespace trillion {

// Groups of a step's rows per rank that take turns at the MoE layers
// (Transformer::set_groups): --micro-batches in expert mode, 0 = the
// default (config/row_groups.hpp).
int expert_groups(const RunShape& shape);

// One rank's part: attention, dense layers, shared experts and head for its
// own sequences, and its share of the routed experts for every rank's.
class ExpertRank {
 public:
  ExpertRank(RmaChannel& ch, const ModelConfig& cfg, TensorSource& source, ThreadPool& pool, const Layout& layout,
             const RunShape& shape);
  // Ranks > 0: serves steps until rank 0 stops the run.
  void serve();
  RankMetrics metrics() const;

  // Runs this rank's rows (global slots) through the whole model.
  StepOutput run_rows(uint64_t ticket, const StepInput& in);
  // One pool per rank, each of this rank's cache size (every rank sizes its
  // pool from the same shape, so rank 0's stands for all).
  KvPools pools() const { return KvPools(ch_.size(), cache_.blocks()); }
  int32_t max_len() const { return cache_.max_len(); }
  const ModelConfig& config() const { return cfg_; }
  RmaChannel& channel() const { return ch_; }
  // Time the coordinator (rank 0) spent waiting for the others, in metrics().
  void add_wait(double seconds) { wait_ += seconds; }

 private:
  RmaChannel& ch_;
  const ModelConfig& cfg_;
  ExpertRange experts_;
  LocalExperts local_;
  RmaExperts rma_;
  Transformer model_;
  KvCache cache_;
  std::unique_ptr<Speculator> spec_;  // --speculative mtp
  double busy_ = 0, wait_ = 0;
};

// Rank 0's view: a StepRunner over every rank, its own rows run by its
// ExpertRank; the others' sent to their owners and their results gathered.
class ExpertRunner : public StepRunner {
 public:
  ExpertRunner(RmaChannel& ch, const ModelConfig& cfg, TensorSource& source, ThreadPool& pool, const Layout& layout,
               const RunShape& shape);
  int64_t vocab_size() const override { return rank_.config().vocab_size; }
  int32_t slots() const override { return slots_; }
  int32_t max_len() const override { return rank_.max_len(); }
  // Each rank caches its own slots: one pool per rank. Rank 0 holds the most
  // slots, so by default its pool is the largest; each rank's pool holds its
  // slots' contexts.
  KvPools kv_pools() const override { return rank_.pools(); }
  void submit(uint64_t ticket, const StepInput& in) override;
  StepOutput next() override;
  void stop();
  RankMetrics metrics() const { return rank_.metrics(); }

 private:
  ExpertRank rank_;
  int32_t slots_;
  std::deque<StepOutput> results_;
  bool stopped_ = false;
};

}  // namespace trillion
