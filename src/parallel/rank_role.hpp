// A rank's part of a run, as one object made by one factory from the
// layout. The coordinator (rank 0) drives the whole model through its
// StepRunner; every other rank serves steps (a pipeline stage, an expert
// owner) until the coordinator stops it. A role owns the activation channel
// between the ranks (its ring sized from the run's shape) and the objects of
// its mode. Adding a parallel mode means its roles here and a case in
// make_rank_role, its rules in mode_rules.cpp (KV pool, shape limits,
// metrics), its layout in src/plan/layout.cpp (make_layout, takes_stages,
// modes_for) and its cost in src/plan/predict.cpp. The commands (src/app)
// never name a mode (tests/docs/test_mode_owner.py checks that).
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "common/thread_pool.hpp"
#include "config/model_config.hpp"
#include "model/weights.hpp"
#include "parallel/rank_metrics.hpp"
#include "parallel/run_shape.hpp"
#include "parallel/step_runner.hpp"
#include "plan/layout.hpp"
#include "runtime/rma_channel.hpp"

namespace trillion {

class MpiEnv;

class RankRole {
 public:
  virtual ~RankRole();
  RankRole(const RankRole&) = delete;
  RankRole& operator=(const RankRole&) = delete;

  // The coordinator runs `work` over the whole model's runner, then ends the
  // other ranks' serve loops; every other rank serves steps until then (and
  // never calls `work`).
  virtual void run(const std::function<void(StepRunner&)>& work) = 0;
  // The coordinator's runner (during and after run()); null on other ranks.
  virtual StepRunner* runner() = 0;
  // What this rank did: busy and wait time, traffic, KV-cache bytes, memory.
  virtual RankMetrics metrics() const = 0;

  // After run(), on every rank: `mine` travels to rank 0, which returns all
  // ranks' metrics in rank order; other ranks return an empty vector.
  std::vector<RankMetrics> gather_metrics(const RankMetrics& mine);

 protected:
  RankRole() = default;

 private:
  friend std::unique_ptr<RankRole> make_rank_role(const MpiEnv&, const ModelConfig&, TensorSource&, ThreadPool&,
                                                  const Layout&, const RunShape&);
  std::unique_ptr<RmaChannel> channel_;  // the parts' channel (null on one rank); outlives them
};

// The activation channel's ring for a run: each peer's ring holds a whole
// step's activations twice over, so a stage never waits for its successor to
// read while it could compute.
ChannelConfig activation_channel(const ModelConfig& cfg, const RunShape& shape);

// Collective: every rank calls it at the same point. Makes this rank's role
// for `layout` (one rank: the whole model; pipeline: its stage; expert: all
// layers with its experts). A failure on any rank throws the same
// CollectiveError on every rank, naming that rank (MpiEnv::check_all).
std::unique_ptr<RankRole> make_rank_role(const MpiEnv& env, const ModelConfig& cfg, TensorSource& source,
                                         ThreadPool& pool, const Layout& layout, const RunShape& shape);

}  // namespace trillion
