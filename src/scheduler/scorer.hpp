// `trillion score`: the log-probability of each given token after the first,
// and optionally the full logits, for token sequences. Sequences run as
// prefill chunks through the runner, up to max_in_flight() chunks at once
// (a pipeline's stages each work on one); results come back in order.
// One sequence at a time holds cache blocks of its own; with shared prefixes
// the full blocks of earlier sequences stay kept until evicted.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "requests/results.hpp"
#include "parallel/step_runner.hpp"

namespace trillion {

struct ScorerOptions {
  int64_t step_tokens = 256;  // rows per step
  std::string logits_dir;     // non-empty: write <dir>/<id>.npy, float32 [T, vocab]
  // The tokenizer's size (0: none): greedy ids stay below it, as generate's
  // choices do, and request ids at or past it are reported (unknown_positions).
  int32_t token_limit = 0;
  // Polled before each step: once true, nothing new is submitted, the steps
  // in flight finish, the requests they complete are reported (a request
  // cut short is not) and run() returns false.
  std::function<bool()> should_stop;
  // Shared prefixes (prefix_cache.hpp): full blocks a request starts with
  // that an earlier request computed are read from the cache, and their rows'
  // results (greedy ids, log-probs) are the earlier request's. Off with
  // logits_dir (every row's logits are written).
  bool prefix_sharing = true;
};

class Scorer {
 public:
  Scorer(StepRunner& runner, ScorerOptions opts);
  // Scores every request; `done` is called for each, in request order.
  // Returns false if should_stop ended the run early.
  bool run(const std::vector<const ScoreRequest*>& requests,
           const std::function<void(const ScoreResult&)>& done);
  int64_t tokens_scored() const { return tokens_; }   // positions computed
  int64_t tokens_reused() const { return reused_; }   // positions read from shared prefixes

 private:
  StepRunner& runner_;
  ScorerOptions opts_;
  int64_t tokens_ = 0;
  int64_t reused_ = 0;
};

// log_softmax(logits)[target], in double.
double token_logprob(const float* logits, int64_t vocab, int32_t target);

// Whether an id can name a file in --logits-out (no path separators, not hidden).
bool is_safe_file_id(const std::string& id);

}  // namespace trillion
