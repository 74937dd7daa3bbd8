#include "sampling/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "sampling/greedy.hpp"
#include "sampling/philox.hpp"

namespace trillion {

namespace {

// Most likely first; equal logits: lower id first. A total order, so the
// result of sorting does not depend on the algorithm.
struct ByLogit {
  const float* logits;
  bool operator()(int32_t a, int32_t b) const {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  }
};

// The `k` most likely ids, most likely first.
std::vector<int32_t> top_ids(const float* logits, int64_t vocab, int64_t k) {
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  std::iota(ids.begin(), ids.end(), 0);
  k = std::clamp<int64_t>(k, 0, vocab);
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), ByLogit{logits});
  ids.resize(size_t(k));
  return ids;
}

// log(sum(exp(logits))) in double, summed in id order.
double log_sum_exp(const float* logits, int64_t vocab) {
  const double m = logits[argmax(logits, vocab)];
  double s = 0;
  for (int64_t i = 0; i < vocab; ++i) s += std::exp(double(logits[i]) - m);
  return m + std::log(s);
}

}  // namespace

std::string sampling_params_error(const SamplingParams& p) {
  if (!(p.temperature >= 0) || !std::isfinite(p.temperature)) return "\"temperature\" must be >= 0";
  if (!(p.top_p > 0 && p.top_p <= 1)) return "\"top_p\" must be in (0, 1]";
  if (!(p.min_p >= 0 && p.min_p <= 1)) return "\"min_p\" must be in [0, 1]";
  if (p.top_k < 0) return "\"top_k\" must be >= 0 (0: no limit)";
  if (p.top_logprobs < 0) return "\"top_logprobs\" must be >= 0";
  return "";
}

int64_t choosable(int64_t vocab, const SamplingParams& p) {
  return p.token_limit > 0 ? std::min<int64_t>(vocab, p.token_limit) : vocab;
}

Candidates sampling_candidates(const float* logits, int64_t vocab, const SamplingParams& p) {
  vocab = choosable(vocab, p);
  Candidates c;
  c.tokens = top_ids(logits, vocab, p.top_k > 0 ? p.top_k : vocab);  // top-k
  const double m = logits[c.tokens.front()], t = p.temperature;
  c.probs.resize(c.tokens.size());
  double sum = 0;
  for (size_t i = 0; i < c.tokens.size(); ++i) sum += c.probs[i] = std::exp((double(logits[c.tokens[i]]) - m) / t);
  for (double& q : c.probs) q /= sum;
  // top-p: the shortest prefix (most likely first) whose mass reaches top_p.
  size_t keep = c.probs.size();
  if (p.top_p < 1) {
    double cum = 0;
    for (size_t i = 0; i < c.probs.size(); ++i) {
      cum += c.probs[i];
      if (cum >= double(p.top_p)) {
        keep = i + 1;
        break;
      }
    }
  }
  // min-p: relative to the most likely token (the first).
  const double floor = double(p.min_p) * c.probs.front();
  while (keep > 1 && c.probs[keep - 1] < floor) --keep;
  c.tokens.resize(keep);
  c.probs.resize(keep);
  sum = 0;
  for (double q : c.probs) sum += q;
  for (double& q : c.probs) q /= sum;
  return c;
}

Sample sample_token(const float* logits, int64_t vocab, const SamplingParams& p, std::span<const int64_t> never) {
  vocab = choosable(vocab, p);  // ids past the tokenizer's are out of the distribution
  // The choice runs on a copy with the excluded ids at -inf (probability 0
  // after the softmax); unless every id is excluded, which leaves the row as is.
  const float* choice = logits;
  std::vector<float> masked;
  if (!never.empty()) {
    masked.assign(logits, logits + vocab);
    int64_t hidden = 0;
    for (int64_t id : never)
      if (id >= 0 && id < vocab && masked[size_t(id)] != -INFINITY) masked[size_t(id)] = -INFINITY, ++hidden;
    if (hidden < vocab) choice = masked.data();
  }
  Sample s;
  if (p.temperature == 0) {
    s.token = argmax(choice, vocab);
  } else {
    const Candidates c = sampling_candidates(choice, vocab, p);
    const double u = philox_uniform(p.seed, uint64_t(p.position));
    double cum = 0;
    // Rounding may leave the cumulative sum a hair under 1: the last candidate
    // that has any probability (an excluded id at -inf has none).
    size_t last = c.tokens.size() - 1;
    while (last > 0 && c.probs[last] <= 0) --last;
    s.token = c.tokens[last];
    for (size_t i = 0; i < c.tokens.size(); ++i) {
      cum += c.probs[i];
      if (u < cum) {
        s.token = c.tokens[i];
        break;
      }
    }
  }
  add_logprobs(logits, vocab, p, s);
  return s;
}

void add_logprobs(const float* logits, int64_t vocab, const SamplingParams& p, Sample& s) {
  vocab = choosable(vocab, p);
  if (p.logprobs || p.top_logprobs > 0) {
    const double lse = log_sum_exp(logits, vocab);
    s.logprob = float(double(logits[s.token]) - lse);
    for (int32_t id : top_ids(logits, vocab, p.top_logprobs))
      s.top.push_back({id, float(double(logits[id]) - lse)});
  }
}

}  // namespace trillion
