#include "app/cluster.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "app/run_config.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/fault.hpp"
#include "common/interrupt.hpp"
#include "common/page_arena.hpp"
#include "config/activations.hpp"
#include "format/mapped_pages.hpp"
#include "kernels/matmul_bf16.hpp"
#include "model/kv_pools.hpp"
#include "parallel/mode_rules.hpp"
#include "parallel/run_footprint.hpp"
#include "platform/page_stats.hpp"
#include "runtime/mpi_env.hpp"
#include "runtime/mpi_transport.hpp"
#include "store/int8_source.hpp"
#include "store/manifest.hpp"

namespace trillion::app {

namespace {
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

Cluster::Cluster(const RunOptions& o) : opts_(o) {
  started_ = now_seconds();  // before MPI_Init: start-up counts it
  int argc = 0;
  char** argv = nullptr;
  env_ = std::make_unique<MpiEnv>(argc, argv);
  // After MPI_Init, so these handlers are the ones in force. Every rank
  // keeps serving on SIGINT/SIGTERM; rank 0 stops the job between steps.
  install_stop_handlers();
  relay_ = std::make_unique<StopRelay>(*env_, stop_signal);
}

Cluster::~Cluster() {
  role_.reset();  // before MPI is finalized (the role owns the channel's window)
  relay_.reset();  // likewise its communicator
}

double Cluster::seconds_until(std::chrono::steady_clock::time_point t) const {
  return std::chrono::duration<double>(t.time_since_epoch()).count() - started_;
}

StopRelay::Stop Cluster::stop_requested() { return relay_->poll(); }

void Cluster::set_up() {
  // Hosts with different Open MPI versions: said before anything is mapped.
  env_->check_same_library();
  // Every rank checks the options and opens the model; a failure on any rank
  // is reported by rank 0 with that rank's message.
  std::string error;
  RankPlace place;
  std::string int8_misfit;  // --activations auto on FP8: why this rank's int8 copy does not fit ("": it does)
  bool bf16_faster = false;
  const bool choosing = opts_.activations == "auto";  // the same flags on every rank
  try {
    check_run_flags(opts_);
    store_ = ModelStore::open(opts_.model_dir, StoreOptions{opts_.verify});
    place = RankPlace{.ranks = env_->size(),
                      .rank = env_->rank(),
                      .ranks_on_host = env_->ranks_on_host(),
                      .host_memory_bytes = physical_memory_bytes(),
                      .physical_cores = physical_cores(),
                      .hardware_threads = int(std::thread::hardware_concurrency()),
                      .thread_limit = thread_limit()};
    if (choosing && auto_weighs_hosts(opts_.activations, store_->manifest().weight_format)) {
      int8_misfit = int8_copy_misfit(opts_, *store_, place);
      bf16_faster = bf16_auto_faster();
    }
  } catch (const Error& e) {
    error = e.what();
  }
  env_->check_all(error.empty(), error);
  // auto on FP8: one path for all, from what each rank knows of its own
  // memory and CPU (ranks may be on different hosts). Every rank votes when
  // the flag is auto, whatever its model says, so none waits alone.
  if (choosing) {
    const MpiEnv::Vote fits = env_->vote(int8_misfit.empty(), int8_misfit);
    const MpiEnv::Vote fast = env_->vote(bf16_faster, "");
    const WeightFormat format = store_->manifest().weight_format;
    if (auto_weighs_hosts(opts_.activations, format)) {
      const Activations act = auto_activations(format, fits.all, fast.all);
      opts_.activations = to_string(act);  // configure_run takes it as given
      if (env_->rank() == 0) {
        const std::string line = auto_activations_notice(act, fits.all ? "" : env_->where(fits.first) + ": " + fits.message,
                                                         fast.all ? "" : env_->where(fast.first));
        std::fprintf(stderr, "trillion: %s\n", line.c_str());
      }
    }
  }
  try {
    const RunConfig rc = configure_run(opts_, *store_, place);
    shape_ = rc.shape;
    layout_ = rc.layout;
    pool_ = std::make_unique<ThreadPool>(rc.threads, rc.cores_to_spare);
    env_->set_threads_per_rank(rc.threads);  // before the channel: how its waits use the core
  } catch (const Error& e) {
    error = e.what();
  }
  env_->check_all(error.empty(), error);
  if (env_->rank() == 0) fault_point("load");
  TensorSource* weights = store_.get();
  if (requantizes_fp8(shape_.activations, store_->manifest().weight_format)) {
    int8_weights_ = std::make_unique<Int8FromFp8Source>(*store_, pool_.get());
    weights = int8_weights_.get();
  }
  role_ = make_rank_role(*env_, store_->config(), *weights, *pool_, layout_, shape_);
  if (opts_.verify) warn_of_small_pages();
}

// Verification has read every weight of this rank through its mapping, so
// smaps shows where they landed. Shards the page cache already held in small
// pages (copied in, converted by an older trillion, read by another program)
// stay so however they are advised (format/mapped_file.hpp).
void Cluster::warn_of_small_pages() const {
  if (!huge_pages_wanted() || !platform::transparent_huge_pages_enabled()) return;
  const MappedPages p = mapped_pages(".h5");
  if (!mostly_small_pages(p)) return;
  std::fprintf(stderr,
               "trillion: rank %d: warning: %.0f of the %.0f MB of weights it has read are mapped on 2 MiB pages: the "
               "page cache held its shards in small pages before this run (a copy, or a read by another program, "
               "puts them there), and batch-1 decode runs up to 1.4x slower so. Drop them from the cache (for f in "
               "%s/*.h5; do dd if=\"$f\" iflag=nocache count=0 status=none; done) and start again.\n",
               env_->rank(), double(p.huge_bytes) / 1e6, double(p.resident_bytes) / 1e6, opts_.model_dir.c_str());
}

int Cluster::run(const std::function<nlohmann::json(StepRunner&)>& work) {
  return run_guarded(*env_, [&] {
    set_up();
    nlohmann::json figures;
    role_->run([&](StepRunner& runner) { figures = work(runner); });
    const std::vector<RankMetrics> ranks = role_->gather_metrics(my_metrics(/*final=*/true));
    if (env_->rank() == 0 && !opts_.metrics_path.empty()) write_metrics(figures, ranks, /*final=*/true);
    return env_->rank() == 0 ? exit_code_ : 0;
  });
}

RankMetrics Cluster::my_metrics(bool final) const {
  RankMetrics m = role_->metrics();
  m.rank = env_->rank();
  m.host = env_->host();
  m.waits = env_->cores_shared() ? "sleep" : "poll";  // as the channel's waits (RmaChannel::backoff)
  m.weight_bytes = share_bytes(store_->config(), store_->manifest(), layout_.ranks.at(size_t(env_->rank())));
  if (final) m.transport = mpi_performance_counters("btl_tb5_");  // tb5's frames and faults (docs/tb5.md)
  return m;
}

void Cluster::progress_metrics(const std::function<nlohmann::json()>& run) {
  if (opts_.metrics_path.empty() || opts_.metrics_interval <= 0 || env_->rank() != 0) return;
  const double now = now_seconds();
  if (now - std::max(started_, last_metrics_) < opts_.metrics_interval) return;
  last_metrics_ = now;
  write_metrics(run(), {my_metrics(/*final=*/false)}, /*final=*/false);
}

void Cluster::write_metrics(nlohmann::json j, const std::vector<RankMetrics>& ranks, bool final) {
  const StepRunner& runner = *role_->runner();
  const KvPools kv = runner.kv_pools();
  j["schema"] = "trillion-metrics/1";
  j["final"] = final;
  j["ranks"] = env_->size();
  j["parallel"] = env_->size() > 1 ? to_string(layout_.mode) : "single";
  j["threads_per_rank"] = pool_->size();
  j["activations"] = opts_.activations;  // the compute path (f32: exact; int8: integer dot products; bf16: bf16 dot products)
  j["max_batch"] = opts_.max_batch;
  j["step_tokens"] = opts_.step_tokens;
  j["kv_cache_blocks"] = kv.blocks_per_pool();  // per pool (per rank), of kv_block_tokens positions
  j["kv_block_tokens"] = kv.block_tokens();
  j["micro_batches"] = runner.max_in_flight();
  // The row groups a rank's step is split into at most, where the mode
  // groups rows (a step forms fewer when its rows are few).
  if (const int groups = row_groups(layout_, shape_)) j["row_groups"] = groups;
  j["wall_seconds"] = now_seconds() - started_;
  // Which BTLs / one-sided component Open MPI was told to use, and the tb5
  // backend when btl/tb5 is loaded (docs/tb5.md).
  if (!transport_) transport_ = mpi_control_variables({"btl", "osc", "btl_tb5_backend_in_use"});
  j["transport"] = *transport_;
  j["per_rank"] = nlohmann::json::array();
  for (const RankMetrics& m : ranks) j["per_rank"].push_back(to_json(m));
  // Written beside the target (under a name of this process's own, so two
  // runs given the same path cannot interleave) and renamed over it: a
  // reader (or a crash) sees the previous complete file or the new one.
  write_file_atomically(opts_.metrics_path, j.dump(2) + "\n");
}

}  // namespace trillion::app
