// Options shared by the commands that run the model (score, generate), and
// the set-up they share: MPI, the model store, the parallel layout, the
// runner on rank 0 and the serve loop on the other ranks.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

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

struct RunOptions {
  std::string model_dir;
  int threads = 0;          // 0: hardware concurrency
  int32_t max_batch = 8;    // sequence slots
  int32_t max_len = 0;      // positions per slot; 0: min(max_position_embeddings, 4096)
  int64_t step_tokens = 256;
  bool verify = true;
  std::string parallel = "pipeline";
  std::string stages;       // --stages override
  int micro_batches = 0;    // 0: one per pipeline stage
  std::string metrics_path; // --metrics FILE.json
};

void add_run_options(boost::program_options::options_description& desc, RunOptions& o);

// Parses argv-style args against desc; prints help and returns false for --help.
bool parse_args(const std::vector<std::string>& args, const char* usage,
                boost::program_options::options_description& desc,
                boost::program_options::positional_options_description* positional = nullptr);

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

 private:
  RankMetrics my_metrics() const;

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
};

}  // namespace trillion::app
