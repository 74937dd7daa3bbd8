// MTP speculative decoding on the rank that holds the head (the one rank,
// the last pipeline stage, each expert-parallel rank for its own slots), as
// DeepSeek-V3 does it: after a step's head chooses each sequence's next
// token, the MTP layer (main model's normed last hidden state + embedding of
// the token just chosen) drafts the token after next; the next step runs the
// new token and the draft as two positions of the sequence, and the head
// verifies the draft (sampling/speculative.hpp) with the logits of the first
// and, when accepted, takes the second's as well. A rejected draft's KV is
// simply overwritten: the next step writes that position again, and no row
// ever reads a position past its own.
//
// The MTP layer keeps its own KV cache (its attention), filled at every
// position the main model ran and kept: prompt rows (with the next prompt
// token) and every produced token's row. Drafts' distributions q stay here,
// per slot, for the next step's verification (the scheduler only sees tokens).
#pragma once
#include <cstdint>
#include <vector>

#include "model/kv_cache.hpp"
#include "model/mtp_layer.hpp"
#include "model/transformer.hpp"
#include "parallel/run_shape.hpp"
#include "parallel/step_runner.hpp"

namespace trillion {

class Speculator {
 public:
  // slots: the sequence slots this rank's head serves (its cache's).
  Speculator(const ModelConfig& cfg, TensorSource& source, ThreadPool& pool, const RunShape& shape, int32_t slots);

  // Chooses the tokens of the logit rows whose logits are in out.logits
  // (verifying drafts, in.drafts), then runs the MTP layer over the rows that
  // stay valid and drafts each sequence's next position into out.drafts.
  // x: [n, hidden] activations after the last layer.
  void choose_and_draft(const Transformer& model, const float* x, const StepInput& in, StepOutput& out);

  int64_t kv_cache_bytes() const { return cache_.bytes(); }

 private:
  const ModelConfig& cfg_;
  MtpLayer mtp_;
  KvCache cache_;
  std::vector<Candidates> q_;  // [slot] the pending draft's distribution (sampled requests)
};

}  // namespace trillion
