// One rank's part of a score/generate run: MPI, the model store, the
// parallel layout, the runner on rank 0 and the serve loop on the others,
// and the run's metrics.
#pragma once
#include <functional>
#include <memory>

#include <nlohmann/json.hpp>

#include "app/run_options.hpp"
#include "common/thread_pool.hpp"
#include "engine/step_runner.hpp"
#include "parallel/rank_metrics.hpp"
#include "plan/layout.hpp"
#include "store/model_store.hpp"

namespace trillion {
class MpiEnv;
class RmaChannel;
}  // namespace trillion

namespace trillion::app {

// One rank's part of a run. Rank 0 drives `runner()`; the others call serve().
class Cluster {
 public:
  explicit Cluster(const RunOptions& o);
  ~Cluster();

  int rank() const;
  int size() const;
  bool coordinator() const { return rank() == 0; }
  const ModelConfig& config() const { return store_->config(); }
  StepRunner& runner();  // rank 0

  // Runs fn on every rank with the job-wide error protocol: an error on one
  // rank ends the job on all with that rank's message.
  int guarded(const std::function<int()>& fn);

  // Ranks > 0: serve steps until rank 0 calls finish().
  void serve();
  // Rank 0: stop the other ranks, gather their metrics, write --metrics with
  // `run` (command-specific figures) merged in. Other ranks: send theirs.
  void finish(const nlohmann::json& run);
  // Rank 0, during the run: rewrites --metrics with the running figures `run`
  // and rank 0's own per-rank entry ("final": false) when --metrics-interval
  // seconds have passed since the last write. The other ranks' figures need
  // messages they only send at the end, so a running file lists rank 0 alone.
  void progress_metrics(const std::function<nlohmann::json()>& run);

 private:
  RankMetrics my_metrics() const;
  void write_metrics(nlohmann::json j, const nlohmann::json& ranks, bool final);

  RunOptions opts_;
  std::unique_ptr<MpiEnv> env_;
  std::unique_ptr<ModelStore> store_;
  std::unique_ptr<ThreadPool> pool_;
  Layout layout_;
  std::unique_ptr<RmaChannel> channel_;
  std::unique_ptr<StepRunner> local_;  // one rank: LocalRunner
  struct Parts;
  std::unique_ptr<Parts> parts_;       // pipeline or expert objects
  double started_ = 0;
  double last_metrics_ = 0;  // when progress_metrics last wrote
};

}  // namespace trillion::app
