// Forward steps of the whole model for batches of token rows, wherever the
// layers live: the seam between the scheduler (src/scheduler) and the
// parallel runtime. The scheduler sees only this; LocalRunner is the trivial
// (one-rank) layout, PipelineRunner and ExpertRunner the parallel ones, each
// made by its rank's role (rank_role.hpp).
//
// Steps are asynchronous: submit() starts one, next() returns the oldest
// unfinished one (steps complete in submission order). A pipeline keeps up to
// max_in_flight() steps (micro-batches) moving through its stages at once.
// Rows of one slot may appear in several in-flight steps only as consecutive
// prefill chunks (every stage runs steps in submission order, so the cache is
// always filled before it is read).
#pragma once
#include <cstdint>
#include <vector>

#include "model/batch.hpp"
#include "model/kv_pools.hpp"
#include "sampling/sampler.hpp"

namespace trillion {

struct StepInput {
  std::vector<int32_t> tokens;     // [n] token ids, one per batch row
  Batch batch;                     // [n] (slot, pos) of each row
  std::vector<int64_t> logit_rows; // rows whose outputs the caller needs, increasing
  bool return_logits = false;      // false: only the chosen token of each logit row
  std::vector<SamplingParams> sampling;  // [logit_rows] how to choose each token; empty: all greedy
  // Speculative decoding (--speculative mtp; parallel/speculator.hpp), else both empty.
  // mtp_next[r]: the token at row r's pos + 1, the MTP layer's input at row r,
  // or kChosenNext for a logit row (the token it chooses).
  std::vector<int32_t> mtp_next;  // [n]
  // drafts[i] >= 0: logit row i + 1 is the same sequence's next position and
  // carries this draft as its input token; row i verifies it. -1: no draft.
  std::vector<int32_t> drafts;    // [logit_rows]
};
inline constexpr int32_t kChosenNext = -1;
inline constexpr int32_t kNotProduced = -2;  // StepOutput::tokens of a draft's row after the draft was rejected

struct StepOutput {
  uint64_t ticket = 0;
  std::vector<int32_t> tokens;  // [logit_rows] chosen (greedy: argmax, lowest id on ties); -1: non-finite logits
  std::vector<float> logprobs;  // [logit_rows] of the chosen token when its params ask, else 0
  std::vector<std::vector<TokenLogprob>> top_logprobs;  // [logit_rows][params.top_logprobs]
  std::vector<float> logits;    // [logit_rows, vocab] when return_logits, else empty
  // Speculative decoding: the MTP layer's draft for the position after this
  // row's token, at the last row each sequence produced (-1 elsewhere); empty without.
  std::vector<int32_t> drafts;  // [logit_rows]
};

class StepRunner {
 public:
  virtual ~StepRunner() = default;
  virtual int64_t vocab_size() const = 0;
  virtual int32_t slots() const = 0;    // sequence slots of the KV cache
  virtual int32_t max_len() const = 0;  // positions per slot
  virtual int max_in_flight() const { return 1; }
  // The paged KV cache's pools, for admission (default: no limit, test fakes).
  virtual KvPools kv_pools() const { return {}; }

  virtual void submit(uint64_t ticket, const StepInput& in) = 0;
  virtual StepOutput next() = 0;  // blocks until the oldest submitted step is done

  StepOutput step(const StepInput& in) {
    submit(0, in);
    return next();
  }
};

}  // namespace trillion
