// The seam between the model and the parallel runtime for routed experts.
// The model routes tokens and combines results; a backend computes the chosen
// experts' outputs, locally (LocalExperts) or on the ranks that own them
// (the runtime's RMA implementation). Outputs come back per (token, k), so the
// combine adds them in top-k order at the same point whatever computed them.
#pragma once
#include <cstdint>

namespace trillion {

struct ExpertRequest {
  int64_t layer = 0;
  int64_t n = 0;               // tokens
  int64_t top_k = 0;
  int64_t hidden = 0;
  const float* x = nullptr;    // [n, hidden] the MoE input (after post_attention_layernorm)
  const int32_t* ids = nullptr;// [n, top_k] chosen expert ids, in top-k order
  float* out = nullptr;        // [n, top_k, hidden] unweighted expert outputs, written by run()
};

class ExpertBackend {
 public:
  virtual ~ExpertBackend() = default;
  virtual void run(const ExpertRequest& req) = 0;
};

}  // namespace trillion
