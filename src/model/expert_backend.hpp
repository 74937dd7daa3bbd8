// The seam between the model and the parallel runtime for routed experts.
// The model routes tokens and combines results; a backend computes the chosen
// experts' outputs, locally (LocalExperts) or on the ranks that own them
// (the runtime's RMA implementation). Outputs come back per (token, k), so the
// combine adds them in top-k order at the same point whatever computed them.
//
// The split form lets a caller overlap groups of rows (Transformer's
// groups of rows in expert mode): begin() hands a request over (an
// expert-parallel backend sends the dispatch and returns), serve() does the
// work the other ranks asked of every begun request (their tokens on this
// rank's experts, all groups in one pass so an expert's weights stream once),
// end() completes the oldest served request (its `out` is written). Requests
// complete first in first out; the requests served together must be of one
// layer; `x`, `ids` and `out` stay valid until end(). run() is the three in one.
#pragma once
#include <cstdint>
#include <vector>

namespace trillion {

struct MlpWeights;

struct ExpertRequest {
  int64_t layer = 0;
  int64_t n = 0;               // tokens
  int64_t top_k = 0;
  int64_t hidden = 0;
  const float* x = nullptr;    // [n, hidden] the MoE input (after post_attention_layernorm)
  const int32_t* ids = nullptr;// [n, top_k] chosen expert ids, in top-k order
  float* out = nullptr;        // [n, top_k, hidden] unweighted expert outputs, written by run()
  // Split form: which group of the step this is, and which of the step's
  // groups have rows (bit j: group j). Group 0 is always exchanged (it
  // carries the mask); a later group without rows is not exchanged at all.
  int group = 0;
  uint64_t groups_with_rows = 1;
  // Optional: the layer's shared expert over the same n tokens, which a
  // backend may compute with the routed ones. One that does writes
  // shared_out [n, hidden] (its bits are mlp_forward's) and sets
  // *shared_done; otherwise the caller computes it. LocalExperts does when
  // experts run one per thread: as one more whole job there it streams
  // faster than its small products split over the pool (batch 1).
  const MlpWeights* shared = nullptr;
  float* shared_out = nullptr;
  bool* shared_done = nullptr;
};

class ExpertBackend {
 public:
  virtual ~ExpertBackend() = default;
  virtual void run(const ExpertRequest& req) = 0;
  // By default begin() computes the request at once (local experts have
  // nobody to overlap with).
  virtual void begin(const ExpertRequest& req) { run(req); }
  virtual void serve() {}
  virtual void end() {}
  // A step in which this rank has no rows: a backend that exchanges with
  // other ranks takes its part in every MoE layer's exchange all the same
  // (`groups` groups, none with rows), so no rank waits on one without
  // tokens. `moe_layers` in the model's order; local experts do nothing.
  virtual void step_without_rows(const std::vector<int64_t>& moe_layers, int groups, int64_t top_k, int64_t hidden) {
    (void)moe_layers, (void)groups, (void)top_k, (void)hidden;
  }
};

}  // namespace trillion
