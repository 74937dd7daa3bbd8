// Pipeline parallel: rank r holds a contiguous range of layers (stage r);
// embeddings on stage 0, final norm + lm_head on the last stage. Rank 0 is
// also the coordinator: its PipelineRunner embeds a step, runs stage 0 and
// puts the activations to rank 1; each later stage runs its layers and puts
// them on; the last stage computes the head and puts the greedy tokens (and
// logits when asked) back to rank 0. Up to `micro_batches` steps are in
// flight, so with as many micro-batches as stages every stage works at once.
// Every stage runs steps in submission order (channel FIFO), which keeps each
// slot's KV cache filled before it is read.
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "model/kv_cache.hpp"
#include "model/transformer.hpp"
#include "parallel/rank_metrics.hpp"
#include "parallel/run_shape.hpp"
#include "parallel/speculator.hpp"
#include "parallel/wire.hpp"
#include "parallel/step_runner.hpp"
#include "plan/layout.hpp"
#include "runtime/rma_channel.hpp"

namespace trillion {

// One rank's part of the pipeline: its stage's layers and KV cache.
class PipelineStage {
 public:
  PipelineStage(RmaChannel& ch, const ModelConfig& cfg, TensorSource& source, ThreadPool& pool,
                const Layout& layout, const RunShape& shape);
  // Ranks > 0: serves steps until rank 0 stops the run.
  void serve();
  RankMetrics metrics() const;

  // Stage 0 (rank 0), for its PipelineRunner: the step's rows embedded and
  // run through this stage's layers; with one stage, the head's choice too.
  std::vector<float> embed_and_forward(const StepInput& in);
  StepOutput head_step(uint64_t ticket, const StepInput& in, const float* x);
  // lm_head rows [0, head_split) of normed rows h [m, d] (a split head's first part).
  void head_rows(const float* h, int64_t m, float* out) const { model_.head(h, m, out); }
  const ModelConfig& config() const { return cfg_; }
  const LayerRange& range() const { return range_; }
  const KvCache& cache() const { return cache_; }
  RmaChannel& channel() const { return ch_; }
  // The coordinator's time, in metrics(): computing, and waiting for the other stages.
  void add_busy(double seconds) { busy_ += seconds; }
  void add_wait(double seconds) { wait_ += seconds; }
  double busy() const { return busy_; }
  double wait() const { return wait_; }

 private:
  // Runs this stage's layers on a step and passes it on (or, on the last
  // stage, returns its result to rank 0).
  void run_and_forward(uint64_t ticket, const StepInput& in, std::vector<float>& x);
  // The last stage's share of a split head (LayerRange::head_split).
  HeadPart head_part(uint64_t ticket, const StepInput& in, const float* x) const;

  RmaChannel& ch_;
  const ModelConfig& cfg_;
  LayerRange range_;
  Transformer model_;
  KvCache cache_;
  std::unique_ptr<Speculator> spec_;  // --speculative mtp, on the last stage
  double busy_ = 0, wait_ = 0;
};

// Rank 0's view: a StepRunner over the whole pipeline, stage 0 its own.
class PipelineRunner : public StepRunner {
 public:
  PipelineRunner(RmaChannel& ch, const ModelConfig& cfg, TensorSource& source, ThreadPool& pool,
                 const Layout& layout, const RunShape& shape);
  int64_t vocab_size() const override { return stage_.config().vocab_size; }
  int32_t slots() const override { return stage_.cache().slots(); }
  int32_t max_len() const override { return stage_.cache().max_len(); }
  int max_in_flight() const override { return micro_batches_; }
  // Every stage's cache has the same blocks and sees the same steps: one pool stands for all.
  KvPools kv_pools() const override { return KvPools(1, stage_.cache().blocks()); }
  void submit(uint64_t ticket, const StepInput& in) override;
  StepOutput next() override;
  // Ends the other ranks' serve loops (call once, after the last step).
  void stop();
  RankMetrics metrics() const { return stage_.metrics(); }

 private:
  void drain_results(bool block);
  StepOutput finish_head(HeadPart part);
  PipelineStage stage_;
  int micro_batches_;
  std::deque<std::pair<uint64_t, StepInput>> pending_;  // split head: steps in flight, for the choice
  int64_t in_flight_ = 0;           // submitted steps whose results have not arrived
  std::deque<StepOutput> results_;  // finished, not yet taken
  bool stopped_ = false;
};

}  // namespace trillion
