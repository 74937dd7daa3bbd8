// Forward steps of the whole model for batches of token rows, wherever the
// layers live. The engine (scheduling, sampling, results) sees only this; the
// one-rank implementation is LocalRunner, the parallel runtime provides the
// pipeline and expert-parallel ones.
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

#include "engine/sampler.hpp"
#include "model/batch.hpp"

namespace trillion {

struct StepInput {
  std::vector<int32_t> tokens;     // [n] token ids, one per batch row
  Batch batch;                     // [n] (slot, pos) of each row
  std::vector<int64_t> logit_rows; // rows whose outputs the caller needs, increasing
  bool return_logits = false;      // false: only the chosen token of each logit row
  std::vector<SamplingParams> sampling;  // [logit_rows] how to choose each token; empty: all greedy
};

struct StepOutput {
  uint64_t ticket = 0;
  std::vector<int32_t> tokens;  // [logit_rows] chosen (greedy: argmax, lowest id on ties)
  std::vector<float> logprobs;  // [logit_rows] of the chosen token when its params ask, else 0
  std::vector<std::vector<TokenLogprob>> top_logprobs;  // [logit_rows][params.top_logprobs]
  std::vector<float> logits;    // [logit_rows, vocab] when return_logits, else empty
};

class StepRunner {
 public:
  virtual ~StepRunner() = default;
  virtual int64_t vocab_size() const = 0;
  virtual int32_t slots() const = 0;    // sequence slots of the KV cache
  virtual int32_t max_len() const = 0;  // positions per slot
  virtual int max_in_flight() const { return 1; }
  // The paged KV cache, for admission: slot s draws blocks of
  // kv_block_tokens() positions from pool s % kv_pools(), each of
  // kv_pool_blocks() blocks. 0 block tokens: no pool limit (test fakes).
  virtual int32_t kv_block_tokens() const { return 0; }
  virtual int64_t kv_pool_blocks() const { return 0; }
  virtual int32_t kv_pools() const { return 1; }

  virtual void submit(uint64_t ticket, const StepInput& in) = 0;
  virtual StepOutput next() = 0;  // blocks until the oldest submitted step is done

  StepOutput step(const StepInput& in) {
    submit(0, in);
    return next();
  }
};

}  // namespace trillion
