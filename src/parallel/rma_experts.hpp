// Expert parallel's ExpertBackend: routed experts are divided between ranks
// (plan/partition.hpp); at each MoE layer every rank sends each (token, k)
// pair to the owner of its expert (a token's activation travels once per
// owner), every rank runs the pairs it received grouped by expert (each
// expert's weights stream once per layer step), and the unweighted outputs go
// back to the token's rank, which combines them in top-k order as always.
// Every rank calls run() at every MoE layer of every step, with or without
// tokens, so the exchanges line up.
#pragma once
#include <cstdint>

#include "model/local_experts.hpp"
#include "runtime/rma_channel.hpp"

namespace trillion {

class RmaExperts : public ExpertBackend {
 public:
  // `local` computes the experts this rank owns (experts_of_rank).
  RmaExperts(RmaChannel& channel, LocalExperts& local, int64_t n_experts);
  void run(const ExpertRequest& req) override;

  double compute_seconds() const { return compute_seconds_; }
  double exchange_seconds() const { return exchange_seconds_; }

 private:
  RmaChannel& ch_;
  LocalExperts& local_;
  int64_t n_experts_;
  double compute_seconds_ = 0, exchange_seconds_ = 0;
};

}  // namespace trillion
