// `trillion score`: the log-probability of each given token after the first,
// and optionally the full logits, for token sequences. A sequence runs as
// prefill chunks through the runner; every row's logits are used.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/request.hpp"
#include "engine/step_runner.hpp"

namespace trillion {

struct ScoreResult {
  std::vector<double> token_logprobs;  // [T-1]: log p(token[t+1] | tokens[0..t])
  std::vector<int32_t> greedy_ids;     // [T]: argmax after each token
};

struct ScorerOptions {
  int64_t step_tokens = 256;  // rows per step
  std::string logits_dir;     // non-empty: write <dir>/<id>.npy, float32 [T, vocab]
};

class Scorer {
 public:
  Scorer(StepRunner& runner, ScorerOptions opts);
  ScoreResult score(const ScoreRequest& req);
  int64_t tokens_scored() const { return tokens_; }

 private:
  StepRunner& runner_;
  ScorerOptions opts_;
  std::vector<float> logits_;
  int64_t tokens_ = 0;
};

// log_softmax(logits)[target], in double.
double token_logprob(const float* logits, int64_t vocab, int32_t target);

// Whether an id can name a file in --logits-out (no path separators, not hidden).
bool is_safe_file_id(const std::string& id);

}  // namespace trillion
