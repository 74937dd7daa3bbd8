#include "parallel/rank_role.hpp"

#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "parallel/expert.hpp"
#include "parallel/local_runner.hpp"
#include "parallel/pipeline.hpp"
#include "parallel/wire.hpp"
#include "runtime/mpi_env.hpp"

namespace trillion {

RankRole::~RankRole() = default;

std::vector<RankMetrics> RankRole::gather_metrics(const RankMetrics& mine) {
  if (!channel_) return {mine};
  if (channel_->rank() != 0) {
    const std::string text = to_json(mine).dump();
    channel_->send(0, kTagMetrics, std::as_bytes(std::span(text.data(), text.size())));
    return {};
  }
  std::vector<RankMetrics> all{mine};
  for (int r = 1; r < channel_->size(); ++r) {
    Message m = channel_->recv(r);
    if (m.tag != kTagMetrics) throw Error("protocol error: expected metrics from rank " + std::to_string(r));
    all.push_back(rank_metrics_from_json(
        nlohmann::json::parse(std::string(reinterpret_cast<const char*>(m.data.data()), m.data.size()))));
  }
  return all;
}

ChannelConfig activation_channel(const ModelConfig& cfg, const RunShape& shape) {
  ChannelConfig cc;
  const int64_t rows = shape.max_step_rows();
  const size_t step_bytes = size_t(rows) * size_t(cfg.hidden_size * 4 + 24) + 64;
  cc.slot_bytes = std::clamp<size_t>(step_bytes / 4, 64 << 10, 4 << 20);
  cc.slots_per_peer = int(std::max<size_t>(4, 2 * ((step_bytes + cc.slot_bytes - 1) / cc.slot_bytes)));
  cc.name = "activations";
  return cc;
}

namespace {

// One rank holds everything: the trivial layout.
class SingleRank final : public RankRole {
 public:
  SingleRank(const ModelConfig& cfg, TensorSource& source, ThreadPool& pool, const RunShape& shape)
      : runner_(cfg, source, pool, shape.slots, shape.max_len, shape.kv_tokens, shape.activations,
                shape.speculative) {}
  void run(const std::function<void(StepRunner&)>& work) override { work(runner_); }
  StepRunner* runner() override { return &runner_; }
  RankMetrics metrics() const override {
    RankMetrics m;
    m.role = "all layers (one rank)";
    fill_run_metrics(m, ChannelStats{}, runner_.busy_seconds(), 0.0, runner_.kv_cache_bytes());
    return m;
  }

 private:
  LocalRunner runner_;
};

// Rank 0 of a parallel layout: `Part` is the mode's StepRunner, which holds
// rank 0's own part (a PipelineStage, an ExpertRank) and drives the others;
// its stop() ends their serve loops.
template <class Part>
class Coordinator final : public RankRole {
 public:
  Coordinator(RmaChannel& ch, const ModelConfig& cfg, TensorSource& source, ThreadPool& pool, const Layout& layout,
              const RunShape& shape)
      : part_(ch, cfg, source, pool, layout, shape) {}
  void run(const std::function<void(StepRunner&)>& work) override {
    work(part_);
    part_.stop();
  }
  StepRunner* runner() override { return &part_; }
  RankMetrics metrics() const override { return part_.metrics(); }

 private:
  Part part_;
};

// Ranks > 0: `Part` serves steps from the channel until rank 0 stops it.
template <class Part>
class Server final : public RankRole {
 public:
  Server(RmaChannel& ch, const ModelConfig& cfg, TensorSource& source, ThreadPool& pool, const Layout& layout,
         const RunShape& shape)
      : part_(ch, cfg, source, pool, layout, shape) {}
  void run(const std::function<void(StepRunner&)>&) override { part_.serve(); }
  StepRunner* runner() override { return nullptr; }
  RankMetrics metrics() const override { return part_.metrics(); }

 private:
  Part part_;
};

template <class CoordinatorPart, class ServerPart>
std::unique_ptr<RankRole> parallel_role(RmaChannel& ch, const ModelConfig& cfg, TensorSource& source,
                                        ThreadPool& pool, const Layout& layout, const RunShape& shape) {
  if (ch.rank() == 0) return std::make_unique<Coordinator<CoordinatorPart>>(ch, cfg, source, pool, layout, shape);
  return std::make_unique<Server<ServerPart>>(ch, cfg, source, pool, layout, shape);
}

}  // namespace

std::unique_ptr<RankRole> make_rank_role(const MpiEnv& env, const ModelConfig& cfg, TensorSource& source,
                                         ThreadPool& pool, const Layout& layout, const RunShape& shape) {
  if (layout.size() != env.size())
    throw Error("layout for " + std::to_string(layout.size()) + " ranks in a run of " + std::to_string(env.size()));
  // The channel is collective: made by every rank before anything can fail
  // on one of them, so a failure below reaches all ranks through check_all
  // (and, unwinding, the channel is left to the job's end, see ~RmaChannel).
  std::unique_ptr<RmaChannel> ch;
  if (env.size() > 1) ch = std::make_unique<RmaChannel>(env, activation_channel(cfg, shape));
  std::unique_ptr<RankRole> role;
  std::string error;
  try {
    if (env.size() == 1)
      role = std::make_unique<SingleRank>(cfg, source, pool, shape);
    else if (layout.mode == ParallelMode::pipeline)
      role = parallel_role<PipelineRunner, PipelineStage>(*ch, cfg, source, pool, layout, shape);
    else
      role = parallel_role<ExpertRunner, ExpertRank>(*ch, cfg, source, pool, layout, shape);
    // The role's parts hold references to the channel; it now owns it (its
    // base outlives them). Until here a failure leaves it to this function.
    role->channel_ = std::move(ch);
  } catch (const Error& e) {
    error = e.what();
  }
  env.check_all(error.empty(), error);
  return role;
}

}  // namespace trillion
