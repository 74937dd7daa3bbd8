// Predicted tokens/s of a layout on a cluster (docs/planning.md): a
// roofline of each rank's work per step, following how the engine executes
// it (parallel/pipeline.cpp, parallel/expert.cpp, parallel/rma_experts.cpp):
//  - each matrix call costs max(bytes / the rank's bandwidth, FLOP / (kernel
//    rate at its rows x threads)) plus one thread-pool dispatch; attention
//    over the cache costs its float32 FLOP and the cache bytes it reads;
//  - routed experts: a step of b tokens touches E(1-(1-k/E)^b) experts of a
//    layer (model_cost.hpp), each reading its weights once and running its
//    share of the b k rows;
//  - pipeline: the batch is split into min(micro-batches, batch) groups; a
//    round of all groups takes max(groups x the slowest stage, the sum of
//    the stages and hops of one group) (a group's next step needs its
//    tokens back); ranks of one host share its bandwidth when their stages
//    run at once, and its cores, time-sliced, when they outnumber them;
//  - expert: every rank runs attention, dense layers and shared experts for
//    its own sequences (slot mod ranks), and at each MoE layer waits for the
//    slowest rank, dispatches (latency + bytes), runs the pairs its experts
//    received, and combines (latency + bytes). With --micro-batches G the
//    rank's sequences form up to G groups (whole sequences, at least 32
//    rows each, as the engine splits them) that take turns: each group streams the
//    dense weights again, and the exchanges' link time hides behind the other
//    groups' attention except the last group's share.
//  - where a machine runs more ranks x threads than it has cores (emulated
//    hosts), a hop whose receiver has waited over kWakeAfterSeconds finds it
//    asleep and costs the host's wake_seconds more: at batch 1, every
//    pipeline hop, and each MoE dispatch to ranks without rows.
#pragma once
#include <functional>
#include <cstdint>
#include <string>
#include <vector>

#include "config/row_groups.hpp"
#include "plan/layout.hpp"
#include "plan/model_cost.hpp"
#include "plan/profile.hpp"

namespace trillion {

// How long a wait yields before it sleeps: runtime/backoff.hpp's
// Backoff::kYieldFor (tests/plan/test_predict.cpp holds them equal).
inline constexpr double kWakeAfterSeconds = 0.001;

// The machines a plan is for: hosts, links, the host of each rank (the
// profiles of profiles/). app/cluster.hpp's Cluster is the running job.
struct ClusterProfile {
  std::vector<int> host_of_rank;    // host index of each rank
  std::vector<HostProfile> hosts;   // by host index
  LinkProfile link;                 // between ranks on different hosts
  LinkProfile local;                // between ranks of one host
  int threads = 0;                  // threads per rank; 0: the host's cores / its ranks (as generate)
  // Emulated hosts (jobs/scaling-study): every host is a network namespace
  // of one machine, hosts[0]; all ranks share its cores and bandwidth, host i
  // pinned to core i mod cores (jobs/netns-agent.sh). Links stay per host.
  bool one_machine = false;
  int ranks_on(int host) const;
  int threads_of(int rank) const;
  const LinkProfile& link_between(int a, int b) const {
    return host_of_rank[size_t(a)] == host_of_rank[size_t(b)] ? local : link;
  }
};

struct PredictOptions {
  std::vector<int64_t> batches = {1, 8, 32, 128};
  int micro_batches = 0;        // pipeline groups (0: one per stage); expert: row groups per rank (0: 2), as generate
  int64_t min_group_rows = kMinGroupRows;  // expert: fewest rows a group gets (config/row_groups.hpp)
  int64_t context = 256;        // cached positions per sequence while decoding
  int64_t prefill_tokens = 256; // rows of one prefill step (generate's --step-tokens)
};

struct Prediction {
  std::string mode;   // "pipeline" | "expert"
  std::string phase;  // "decode" | "prefill"
  int64_t batch = 0;  // sequences decoding together; prefill: the step's prompt tokens
  double tokens_per_s = 0;
  double step_seconds = 0;     // decode: one token for every sequence of the batch; prefill: one step
  std::string bound;           // what most of the step's time waits for: memory | compute | link
  double memory_seconds = 0, compute_seconds = 0, link_seconds = 0;  // the critical path's split
  double group_latency_seconds = 0;  // one group's step, submit to result (what --metrics times): the round
  // What `generate --metrics` reports as tokens_per_second.decode / .prefill:
  // a step's tokens over its submit-to-result time, summed over steps. With
  // several pipeline groups in flight that is one group's rate, not the
  // throughput (tokens_per_s); with one group (1 rank, expert mode) the same.
  double metrics_tokens_per_s = 0;
};

std::vector<Prediction> predict(const ModelCost& cost, const Layout& layout, const ClusterProfile& cluster,
                                const PredictOptions& opts);

// --stages auto: pipeline stages balanced by predicted time, not bytes. Each
// layer's seconds in one decode step of `rows` rows (a group's) at `context`
// cached positions, on `host` with `threads` threads; the head (lm_head at
// `rows` logit rows) on the last stage, the embedding lookup free; then the
// split minimizing the slowest stage (balance_pipeline over these times).
// Bytes and time part where experts are concerned: a step of a few tokens
// reads top_k of a layer's experts, not all the bytes a byte balance
// weighs, while the head and the dense layers are read whole every step.
// Hosts are taken alike (a stage's share of its host scales all its layers
// alike). With 2 or more ranks it also weighs splitting lm_head's rows
// between the first and last stage (LayerRange::head_split) in steps of
// kHeadSplitStep rows: a layer is too coarse a unit to balance a few stages
// (the bench model's 6 layers over 2 stages bound the speed-up at ~1.5x),
// while the head divides by rows. The link is not weighed: a split sends the
// last stage's logit columns to rank 0 (plan's prediction counts them).
struct StagePlan {
  std::string stages;      // a --stages string, "0-2,3-5"
  int64_t head_split = 0;  // a --head-split: lm_head rows on the first stage
};
inline constexpr int64_t kHeadSplitStep = 128;  // FP8's block rows; any multiple works
StagePlan time_balanced_stages(const ModelCost& cost, const HostProfile& host, int threads, int ranks, double rows,
                               int64_t context, bool split_head = true);

// The split `--stages auto` makes for a run's flags, the one rule generate
// and plan share (so the same flags give the same split): a decode step at
// --max-batch in min(micro-batches (0: one per stage), max-batch) groups,
// 256 cached positions (or max-len - 1), --threads or the profile's cores
// (a rank's own core count could differ between hosts). With one group in
// flight the head is not split.
StagePlan auto_stages(const ModelCost& cost, const HostProfile& host, int threads, int ranks, int32_t max_batch,
                      int micro_batches, int64_t max_len);

// The layout flags as generate and plan both read them: --stages (ranges,
// "auto" or "") and --head-split (rows, "auto" or ""). With --stages auto
// in pipeline mode, `auto_plan` gives the stages and, unless --head-split is
// a number, the split (none where `may_split` is false: --speculative mtp).
// --head-split auto without --stages auto is an InputError.
StagePlan resolve_stage_plan(const std::string& stages, const std::string& head_split, bool pipeline, bool may_split,
                             const std::function<StagePlan()>& auto_plan);

// The layout generate and plan make from the same flags: the stage plan
// (resolve_stage_plan, for a mode that takes stages) and make_layout over
// it. `whole_head` (--speculative mtp, which drafts from the whole head on
// the last stage): auto does not split the head and a --head-split is an
// InputError.
struct RunLayout {
  StagePlan stages;  // as resolved: "auto" replaced by the split it chose
  Layout layout;
};
RunLayout resolve_layout(const ModelConfig& cfg, const ModelSizes& sizes, ParallelMode mode, int ranks,
                         const std::string& stages, const std::string& head_split, bool whole_head,
                         const std::function<StagePlan()>& auto_plan);

}  // namespace trillion
