#include "engine/scorer.hpp"

#include <algorithm>
#include <cmath>
#include <memory>

#include "common/error.hpp"
#include "common/npy.hpp"
#include "engine/greedy.hpp"

namespace trillion {

double token_logprob(const float* logits, int64_t vocab, int32_t target) {
  double mx = logits[0];
  for (int64_t i = 1; i < vocab; ++i) mx = std::max(mx, double(logits[i]));
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(double(logits[i]) - mx);
  return double(logits[target]) - mx - std::log(sum);
}

bool is_safe_file_id(const std::string& id) {
  if (id.empty() || id[0] == '.' || id.size() > 200) return false;
  for (char c : id)
    if (c == '/' || c == '\\' || c == '\0') return false;
  return true;
}

Scorer::Scorer(StepRunner& runner, ScorerOptions opts) : runner_(runner), opts_(std::move(opts)) {}

ScoreResult Scorer::score(const ScoreRequest& req) {
  const int64_t T = int64_t(req.token_ids.size()), vocab = runner_.vocab_size();
  const int64_t chunk = std::max<int64_t>(1, opts_.step_tokens);
  std::unique_ptr<NpyRowWriter> npy;
  if (!opts_.logits_dir.empty()) {
    if (!is_safe_file_id(req.id))
      throw InputError("id \"" + req.id + "\" cannot name a logits file (no '/', no leading '.')");
    npy = std::make_unique<NpyRowWriter>(opts_.logits_dir + "/" + req.id + ".npy", T, vocab);
  }
  ScoreResult result;
  result.token_logprobs.reserve(size_t(T - 1));
  for (int64_t begin = 0; begin < T; begin += chunk) {
    const int64_t n = std::min(chunk, T - begin);
    StepInput in;
    for (int64_t p = begin; p < begin + n; ++p) {
      in.tokens.push_back(req.token_ids[size_t(p)]);
      in.batch.rows.push_back({0, int32_t(p)});
      in.logit_rows.push_back(p - begin);
    }
    logits_.resize(size_t(n * vocab));
    runner_.step(in, logits_.data());
    for (int64_t i = 0; i < n; ++i) {
      const float* row = &logits_[size_t(i * vocab)];
      result.greedy_ids.push_back(argmax(row, vocab));
      if (begin + i + 1 < T)
        result.token_logprobs.push_back(token_logprob(row, vocab, req.token_ids[size_t(begin + i + 1)]));
    }
    if (npy) npy->append(logits_.data(), n);
  }
  if (npy) npy->close();
  tokens_ += T;
  return result;
}

}  // namespace trillion
