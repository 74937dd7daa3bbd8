// One rank's part of a score/generate run, set up from the command line:
// MPI, the model store, the thread pool, the parallel layout and this rank's
// role in it (src/parallel/rank_role.hpp), and the run's --metrics file.
// Nothing here depends on the parallel mode: the role does.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "app/run_options.hpp"
#include "common/thread_pool.hpp"
#include "parallel/rank_role.hpp"
#include "parallel/run_shape.hpp"
#include "plan/layout.hpp"
#include "runtime/stop_relay.hpp"
#include "store/int8_source.hpp"
#include "store/model_store.hpp"

namespace trillion {
class MpiEnv;
}  // namespace trillion

namespace trillion::app {

class Cluster {
 public:
  explicit Cluster(const RunOptions& o);
  ~Cluster();

  // Runs a batch command on every rank under the job-wide error protocol (an
  // error on one rank ends the job on all, with that rank's message): checks
  // the options, opens the model, makes this rank's role; then rank 0 calls
  // `work` with the whole model's runner, which returns the run's figures for
  // --metrics, while the other ranks serve steps. At the end every rank's
  // metrics travel to rank 0, which writes --metrics. Returns the exit code
  // (rank 0: 0 or what `work` passed to end_early; other ranks: 0).
  int run(const std::function<nlohmann::json(StepRunner&)>& work);

  const ModelConfig& config() const { return store_->config(); }

  // Rank 0, during work: rewrites --metrics with the running figures `run`
  // and rank 0's own per-rank entry ("final": false) when --metrics-interval
  // seconds have passed since the last write. The other ranks' figures need
  // messages they only send at the end, so a running file lists rank 0 alone.
  void progress_metrics(const std::function<nlohmann::json()>& run);

  // Seconds from the Cluster's making (before MPI_Init) to `t`.
  double seconds_until(std::chrono::steady_clock::time_point t) const;

  // Rank 0, during work: a SIGINT/SIGTERM that this or any other rank
  // received (signal 0: none). Cheap enough to poll every step.
  StopRelay::Stop stop_requested();
  // Rank 0, during work: the run stopped early; run() returns `code` after
  // the normal end (the other ranks stopped, --metrics written).
  void end_early(int code) { exit_code_ = code; }

 private:
  void set_up();
  void warn_of_small_pages() const;  // after loading: the weights mostly on small pages (docs/kernels.md, "Memory", says why)
  // final: with the transport's counters, which MPI_T enumerates (every
  // performance variable: too slow for each progress snapshot).
  RankMetrics my_metrics(bool final) const;
  void write_metrics(nlohmann::json j, const std::vector<RankMetrics>& ranks, bool final);

  RunOptions opts_;
  std::unique_ptr<MpiEnv> env_;
  std::unique_ptr<StopRelay> relay_;
  std::unique_ptr<ModelStore> store_;
  std::unique_ptr<Int8FromFp8Source> int8_weights_;  // FP8 models on the integer-dot path
  std::unique_ptr<ThreadPool> pool_;
  RunShape shape_;  // configure_run's, applied by set_up
  Layout layout_;
  std::unique_ptr<RankRole> role_;
  double started_ = 0;  // steady clock, seconds: when the Cluster was made (before MPI_Init)
  // Open MPI's transport selection, read once: reading it (MPI_T) opens
  // every MCA component, seconds with some plugins, and it never changes in a run.
  std::optional<nlohmann::json> transport_;
  double last_metrics_ = 0;  // when progress_metrics last wrote
  int exit_code_ = 0;
};

}  // namespace trillion::app
