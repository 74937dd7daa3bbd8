#include "app/cluster.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <thread>

#include "common/error.hpp"
#include "engine/local_runner.hpp"
#include "parallel/expert.hpp"
#include "parallel/pipeline.hpp"
#include "runtime/mpi_env.hpp"
#include "runtime/rma_channel.hpp"
#include "store/manifest.hpp"

namespace trillion::app {

namespace {
constexpr int32_t kTagMetrics = 6;  // after kTagStop: each rank's metrics to rank 0

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

nlohmann::json to_json(const RankMetrics& m) {
  return {{"rank", m.rank}, {"host", m.host}, {"role", m.role}, {"busy_seconds", m.busy_seconds},
          {"wait_seconds", m.wait_seconds}, {"bytes_sent", m.bytes_sent}, {"messages_sent", m.messages_sent},
          {"bytes_received", m.bytes_received}, {"messages_received", m.messages_received},
          {"weight_bytes", m.weight_bytes}, {"kv_cache_bytes", m.kv_cache_bytes},
          {"peak_rss_bytes", m.peak_rss_bytes}};
}
}  // namespace

struct Cluster::Parts {
  std::unique_ptr<PipelineStage> stage;     // ranks > 0, pipeline
  std::unique_ptr<PipelineRunner> prunner;  // rank 0, pipeline
  std::unique_ptr<ExpertRank> erank;        // ranks > 0, expert
  std::unique_ptr<ExpertRunner> erunner;    // rank 0, expert
};

Cluster::Cluster(const RunOptions& o) : opts_(o), parts_(std::make_unique<Parts>()) {
  int argc = 0;
  char** argv = nullptr;
  env_ = std::make_unique<MpiEnv>(argc, argv);
  started_ = now_seconds();
}

Cluster::~Cluster() {
  parts_.reset();
  local_.reset();
  channel_.reset();
}

int Cluster::rank() const { return env_->rank(); }
int Cluster::size() const { return env_->size(); }

int Cluster::guarded(const std::function<int()>& fn) {
  return run_guarded(*env_, [&] {
    // Set-up: every rank checks the options and opens the model; a failure on
    // any rank is reported by rank 0 with that rank's message.
    std::string error;
    RunShape shape;
    ParallelMode mode = ParallelMode::pipeline;
    try {
      if (opts_.max_batch < 1) throw InputError("--max-batch must be at least 1");
      if (opts_.step_tokens < 1) throw InputError("--step-tokens must be at least 1");
      if (opts_.threads < 0) throw InputError("--threads must be >= 0");
      if (opts_.micro_batches < 0) throw InputError("--micro-batches must be >= 0");
      if (opts_.kv_cache_tokens < 0) throw InputError("--kv-cache-tokens must be >= 0");
      if (opts_.metrics_interval < 0) throw InputError("--metrics-interval must be >= 0");
      mode = parse_parallel_mode(opts_.parallel);
      store_ = ModelStore::open(opts_.model_dir, StoreOptions{opts_.verify});
      const ModelConfig& cfg = store_->config();
      const int64_t max_len =
          opts_.max_len > 0 ? opts_.max_len : std::min<int64_t>(cfg.max_position_embeddings, 4096);
      if (max_len > cfg.max_position_embeddings)
        throw InputError("--max-len " + std::to_string(max_len) + " exceeds the model's max_position_embeddings (" +
                         std::to_string(cfg.max_position_embeddings) + ")");
      shape = RunShape{opts_.max_batch, int32_t(max_len), opts_.micro_batches, opts_.kv_cache_tokens};
      layout_ = make_layout(cfg, model_sizes(cfg, store_->manifest()), mode, size(), opts_.stages);
      // Ranks sharing a host share its cores: by default each takes its part
      // of the physical cores; spinning for work only pays when no thread
      // competes for a core (ThreadPool).
      const int ranks_here = std::max(1, env_->ranks_on_host());
      const int threads = opts_.threads > 0 ? opts_.threads : std::max(1, physical_cores() / ranks_here);
      const bool cores_to_spare =
          int64_t(threads) * ranks_here <= int64_t(std::max(1u, std::thread::hardware_concurrency()));
      pool_ = std::make_unique<ThreadPool>(threads, cores_to_spare);
    } catch (const Error& e) {
      error = e.what();
    }
    env_->check_all(error.empty(), error);

    const ModelConfig& cfg = store_->config();
    if (size() > 1) {
      // The ring to each peer holds a whole step's activations twice over, so
      // a stage never waits for its successor to read while it could compute.
      ChannelConfig cc;
      const int64_t rows = opts_.step_tokens + opts_.max_batch;
      const size_t step_bytes = size_t(rows) * size_t(cfg.hidden_size * 4 + 24) + 64;
      cc.slot_bytes = std::clamp<size_t>(step_bytes / 4, 64 << 10, 4 << 20);
      cc.slots_per_peer = int(std::max<size_t>(4, 2 * ((step_bytes + cc.slot_bytes - 1) / cc.slot_bytes)));
      cc.name = "activations";
      channel_ = std::make_unique<RmaChannel>(*env_, cc);
    }
    try {
      if (size() == 1) {
        local_ = std::make_unique<LocalRunner>(cfg, *store_, *pool_, shape.slots, shape.max_len, shape.kv_tokens);
      } else if (mode == ParallelMode::pipeline) {
        if (coordinator())
          parts_->prunner = std::make_unique<PipelineRunner>(*channel_, cfg, *store_, *pool_, layout_, shape);
        else
          parts_->stage = std::make_unique<PipelineStage>(*channel_, cfg, *store_, *pool_, layout_, shape);
      } else {
        if (coordinator())
          parts_->erunner = std::make_unique<ExpertRunner>(*channel_, cfg, *store_, *pool_, layout_, shape);
        else
          parts_->erank = std::make_unique<ExpertRank>(*channel_, cfg, *store_, *pool_, layout_, shape);
      }
    } catch (const Error& e) {
      error = e.what();
    }
    env_->check_all(error.empty(), error);
    return fn();
  });
}

StepRunner& Cluster::runner() {
  if (local_) return *local_;
  if (parts_->prunner) return *parts_->prunner;
  if (parts_->erunner) return *parts_->erunner;
  throw Error("the runner lives on rank 0");
}

void Cluster::serve() {
  if (parts_->stage) parts_->stage->serve();
  if (parts_->erank) parts_->erank->serve();
}

RankMetrics Cluster::my_metrics() const {
  RankMetrics m;
  if (parts_->prunner) m = parts_->prunner->metrics();
  else if (parts_->stage) m = parts_->stage->metrics();
  else if (parts_->erunner) m = parts_->erunner->metrics();
  else if (parts_->erank) m = parts_->erank->metrics();
  else {
    m.role = "all layers (one rank)";
    m.busy_seconds = static_cast<const LocalRunner&>(*local_).busy_seconds();
    m.kv_cache_bytes = static_cast<const LocalRunner&>(*local_).kv_cache_bytes();
    m.peak_rss_bytes = peak_rss_bytes();
  }
  m.rank = rank();
  m.host = env_->host();
  m.weight_bytes = share_bytes(store_->config(), store_->manifest(), layout_.ranks.at(size_t(rank())));
  return m;
}

void Cluster::finish(const nlohmann::json& run) {
  if (parts_->prunner) parts_->prunner->stop();
  if (parts_->erunner) parts_->erunner->stop();
  const std::string mine = to_json(my_metrics()).dump();
  if (!coordinator()) {
    channel_->send(0, kTagMetrics, std::as_bytes(std::span(mine.data(), mine.size())));
    return;
  }
  nlohmann::json ranks = nlohmann::json::array();
  ranks.push_back(nlohmann::json::parse(mine));
  for (int r = 1; r < size(); ++r) {
    Message m = channel_->recv(r);
    if (m.tag != kTagMetrics) throw Error("protocol error: expected metrics from rank " + std::to_string(r));
    ranks.push_back(nlohmann::json::parse(std::string(reinterpret_cast<const char*>(m.data.data()), m.data.size())));
  }
  if (!opts_.metrics_path.empty()) write_metrics(run, ranks, /*final=*/true);
}

void Cluster::progress_metrics(const std::function<nlohmann::json()>& run) {
  if (opts_.metrics_path.empty() || opts_.metrics_interval <= 0 || !coordinator()) return;
  const double now = now_seconds();
  if (now - std::max(started_, last_metrics_) < opts_.metrics_interval) return;
  last_metrics_ = now;
  write_metrics(run(), nlohmann::json::array({to_json(my_metrics())}), /*final=*/false);
}

void Cluster::write_metrics(nlohmann::json j, const nlohmann::json& ranks, bool final) {
  j["schema"] = "trillion-metrics/1";
  j["final"] = final;
  j["ranks"] = size();
  j["parallel"] = size() > 1 ? to_string(layout_.mode) : "single";
  j["threads_per_rank"] = pool_->size();
  j["max_batch"] = opts_.max_batch;
  j["step_tokens"] = opts_.step_tokens;
  j["kv_cache_blocks"] = runner().kv_pool_blocks();  // per pool (per rank), of kv_block_tokens positions
  j["kv_block_tokens"] = runner().kv_block_tokens();
  j["micro_batches"] = runner().max_in_flight();
  j["wall_seconds"] = now_seconds() - started_;
  j["per_rank"] = ranks;
  // Written beside the target and renamed over it: a reader (or a crash)
  // sees the previous complete file or the new one, never a torn one.
  const std::string tmp = opts_.metrics_path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump(2) << "\n";
    out.flush();
    if (!out) throw SystemError(tmp + ": cannot write metrics");
  }
  if (std::rename(tmp.c_str(), opts_.metrics_path.c_str()) != 0)
    throw SystemError(opts_.metrics_path + ": cannot replace metrics file");
}

}  // namespace trillion::app
