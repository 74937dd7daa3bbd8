#include "sampling/speculative.hpp"

#include <algorithm>
#include <unordered_map>

#include "sampling/greedy.hpp"
#include "sampling/philox.hpp"

namespace trillion {
namespace {

double prob_of(const Candidates& c, int32_t token) {
  for (size_t i = 0; i < c.tokens.size(); ++i)
    if (c.tokens[i] == token) return c.probs[i];
  return 0.0;
}

// Inverse CDF in the candidates' order (sample_token's rule).
int32_t draw(const Candidates& c, double u) {
  double cum = 0;
  for (size_t i = 0; i < c.tokens.size(); ++i) {
    cum += c.probs[i];
    if (u < cum) return c.tokens[i];
  }
  return c.tokens.back();  // rounding may leave the cumulative sum a hair under 1
}

}  // namespace

int32_t draft_token(const float* draft_logits, int64_t vocab, const SamplingParams& p, Candidates* q) {
  if (p.temperature == 0) return argmax(draft_logits, choosable(vocab, p));
  *q = sampling_candidates(draft_logits, vocab, p);
  return draw(*q, philox_uniform(p.seed, uint64_t(p.position), kDraftStream));
}

Verdict speculative_choice(const Candidates& p, const Candidates& q, int32_t draft, double u_accept,
                           double u_residual) {
  const double pd = prob_of(p, draft), qd = prob_of(q, draft);
  // u < p/q, written without the division (q(d) > 0 for a drawn draft; q(d) = 0 rejects).
  if (qd > 0 && u_accept * qd < pd) return {draft, true};
  std::unordered_map<int32_t, double> qmap;
  for (size_t i = 0; i < q.tokens.size(); ++i) qmap.emplace(q.tokens[i], q.probs[i]);
  Candidates r;
  double sum = 0;
  for (size_t i = 0; i < p.tokens.size(); ++i) {
    auto it = qmap.find(p.tokens[i]);
    const double excess = std::max(0.0, p.probs[i] - (it == qmap.end() ? 0.0 : it->second));
    if (excess > 0) {
      r.tokens.push_back(p.tokens[i]);
      r.probs.push_back(excess);
      sum += excess;
    }
  }
  // A rejection implies p(d) < q(d), so p has mass where q has less; should
  // rounding leave none, p itself is the residual's limit.
  if (!(sum > 0)) return {draw(p, u_residual), false};
  for (double& v : r.probs) v /= sum;
  const int32_t t = draw(r, u_residual);
  return {t, t == draft};  // the residual never holds d (p(d) - q(d) < 0); kept exact regardless
}

Verdict verify_draft(const float* target_logits, int64_t vocab, const SamplingParams& p, int32_t draft,
                     const Candidates& q) {
  if (p.temperature == 0) {
    const int32_t t = argmax(target_logits, choosable(vocab, p));
    return {t, t == draft};
  }
  const Candidates pc = sampling_candidates(target_logits, vocab, p);
  return speculative_choice(pc, q, draft, philox_uniform(p.seed, uint64_t(p.position), kAcceptStream),
                            philox_uniform(p.seed, uint64_t(p.position), kResidualStream));
}

}  // namespace trillion
