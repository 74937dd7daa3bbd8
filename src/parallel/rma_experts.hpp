// Expert parallel's ExpertBackend: routed experts are divided between ranks
// (plan/partition.hpp); at each MoE layer every rank sends each (token, k)
// pair to the owner of its expert (a token's activation travels once per
// owner), every rank runs the pairs it received grouped by expert (each
// expert's weights stream once per layer step), and the unweighted outputs go
// back to the token's rank, which combines them in top-k order as always.
// Every rank makes the same sequence of begin / serve / end calls at every
// MoE layer of every step, with or without tokens, so the exchanges line up
// (the messages of a pair of ranks are taken in the order they were posted).
// Row groups (Transformer::set_groups): group 0 is always exchanged and says
// which of the sender's later groups have rows; the others are not sent, so
// groups cost nothing on a step too small to split.
#pragma once
#include <cstdint>
#include <deque>
#include <vector>

#include "model/local_experts.hpp"
#include "parallel/exchange_queue.hpp"
#include "runtime/rma_channel.hpp"

namespace trillion {

class RmaExperts : public ExpertBackend {
 public:
  // `local` computes the experts this rank owns (experts_of_rank).
  RmaExperts(RmaChannel& channel, LocalExperts& local, int64_t n_experts);
  void run(const ExpertRequest& req) override;
  void begin(const ExpertRequest& req) override;  // posts the dispatch; never waits
  void serve() override;  // other ranks' pairs of every begun group, one pass over our experts
  void end() override;                            // our pairs' outputs, placed
  // Each MoE layer as a rank with rows runs it: `groups` begins (none with
  // rows; group 0 still exchanged, carrying the empty mask), one serve, the ends.
  void step_without_rows(const std::vector<int64_t>& moe_layers, int groups, int64_t top_k, int64_t hidden) override;
  // Waits until every posted message has left: call before the channel
  // carries anything else (the step's result).
  void drain() { queue_.drain(); }

  double compute_seconds() const { return compute_seconds_; }
  double exchange_seconds() const { return queue_.wait_seconds(); }

 private:
  // One begun request: where each of its pairs went, and where outputs go.
  struct InFlight {
    std::vector<std::vector<int64_t>> pair_slot;  // per owner rank: i * top_k + k of each pair sent, in order
    int64_t layer = 0, hidden = 0;
    float* out = nullptr;
    int group = 0;
    bool exchanged = true;  // false: a later group without rows, which skips its exchange
  };
  RmaChannel& ch_;
  LocalExperts& local_;
  int64_t n_experts_;
  ExchangeQueue queue_;
  std::deque<InFlight> begun_, served_;
  double compute_seconds_ = 0;
};

}  // namespace trillion
