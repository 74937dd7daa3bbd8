// Speculative sampling's accept/resample rule (sampling/speculative.hpp):
// hand-computed cases, and chi-square tests over fixed seeds that the tokens
// it yields have the target distribution p exactly, whatever the draft's q
// (including q's candidates outside p's after top-k / top-p).
#define BOOST_TEST_MODULE speculative
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "sampling/philox.hpp"
#include "sampling/sampler.hpp"
#include "sampling/speculative.hpp"

using namespace trillion;

namespace {

std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(p > 0 ? float(std::log(p)) : -1e30f);
  return l;
}

Candidates dist(std::vector<int32_t> t, std::vector<double> p) { return Candidates{std::move(t), std::move(p)}; }

// Upper 0.1% point of chi-square with `df` degrees of freedom (Wilson-Hilferty, z = 3.0902).
double chi2_critical(int df) {
  const double k = df, z = 3.0902;
  const double a = 1 - 2 / (9 * k) + z * std::sqrt(2 / (9 * k));
  return k * a * a * a;
}

struct Trial {
  std::map<int32_t, int64_t> counts;
  int64_t accepted = 0;
};

// Draft from q's logits, verify against p's, for seeds 0..n-1 at one position.
Trial run(const std::vector<float>& target, const std::vector<float>& draft, SamplingParams p, int n) {
  Trial t;
  for (int s = 0; s < n; ++s) {
    p.seed = uint64_t(s) * 0x9E3779B97F4A7C15ull + 17;
    Candidates q;
    const int32_t d = draft_token(draft.data(), int64_t(draft.size()), p, &q);
    const Verdict v = verify_draft(target.data(), int64_t(target.size()), p, d, q);
    ++t.counts[v.token];
    t.accepted += v.accepted;
  }
  return t;
}

// Chi-square of the counts against n * (the target's candidate distribution).
void check_matches_target(const Trial& t, const Candidates& expect, int n) {
  double chi2 = 0;
  std::map<int32_t, double> e;
  for (size_t i = 0; i < expect.tokens.size(); ++i) e[expect.tokens[i]] = expect.probs[i] * n;
  for (const auto& [tok, c] : t.counts) {
    BOOST_TEST_INFO("token " << tok << " (" << c << " times) is not a candidate of the target");
    BOOST_TEST(e.count(tok) == 1u);
  }
  for (const auto& [tok, ex] : e) {
    const double o = t.counts.count(tok) ? double(t.counts.at(tok)) : 0.0;
    chi2 += (o - ex) * (o - ex) / ex;
  }
  const int df = int(e.size()) - 1;
  BOOST_TEST_MESSAGE("chi2 " << chi2 << " df " << df << " critical " << chi2_critical(df));
  BOOST_TEST(chi2 < chi2_critical(df));
}

// Sum over tokens of min(p, q): the probability a draft from q is accepted.
double overlap(const Candidates& p, const Candidates& q) {
  std::map<int32_t, double> pm;
  for (size_t i = 0; i < p.tokens.size(); ++i) pm[p.tokens[i]] = p.probs[i];
  double s = 0;
  for (size_t i = 0; i < q.tokens.size(); ++i) s += std::min(q.probs[i], pm.count(q.tokens[i]) ? pm[q.tokens[i]] : 0.0);
  return s;
}

}  // namespace

BOOST_AUTO_TEST_CASE(hand_computed_accept_and_residual) {
  // p = {a .5, b .3, c .2}, q = {a .2, b .6, c .2}; draft b: p/q = 0.5.
  const Candidates p = dist({0, 1, 2}, {0.5, 0.3, 0.2}), q = dist({1, 0, 2}, {0.6, 0.2, 0.2});
  Verdict v = speculative_choice(p, q, 1, 0.49, 0.99);
  BOOST_TEST(v.accepted);
  BOOST_TEST(v.token == 1);
  // Rejected: max(0, p - q) = {a .3, b 0, c 0}: a, whatever the residual number.
  for (double u : {0.0, 0.5, 0.999999}) {
    v = speculative_choice(p, q, 1, 0.51, u);
    BOOST_TEST(!v.accepted);
    BOOST_TEST(v.token == 0);
  }
  // A draft p gives more mass than q is always accepted (p/q >= 1).
  BOOST_TEST(speculative_choice(p, q, 0, 0.999999, 0.0).accepted);
  // A draft outside p's candidates is never accepted; residual {a .3, c .0} -> a, and
  // with q = {d 1}: residual = p itself, drawn by the residual number.
  const Candidates qd = dist({7}, {1.0});
  BOOST_TEST(speculative_choice(p, qd, 7, 0.0, 0.1).token == 0);
  BOOST_TEST(speculative_choice(p, qd, 7, 0.0, 0.6).token == 1);
  BOOST_TEST(speculative_choice(p, qd, 7, 0.0, 0.9).token == 2);
}

BOOST_AUTO_TEST_CASE(greedy_is_the_argmax_either_way) {
  const std::vector<float> target = logits_of({0.1, 0.5, 0.4}), draft = logits_of({0.6, 0.1, 0.3});
  SamplingParams p;  // temperature 0
  Candidates q;
  const int32_t d = draft_token(draft.data(), 3, p, &q);
  BOOST_TEST(d == 0);
  Verdict v = verify_draft(target.data(), 3, p, d, q);
  BOOST_TEST(v.token == 1);
  BOOST_TEST(!v.accepted);
  v = verify_draft(target.data(), 3, p, 1, q);
  BOOST_TEST((v.token == 1 && v.accepted));
  // token_limit masks padding ids out of both the draft and the verdict.
  p.token_limit = 1;
  BOOST_TEST(draft_token(draft.data(), 3, p, &q) == 0);
  BOOST_TEST(verify_draft(target.data(), 3, p, 0, q).token == 0);
}

BOOST_AUTO_TEST_CASE(plain_stream_unchanged) {
  // Stream 0 is plain sampling's number: speculative streams never reuse it.
  for (uint64_t pos : {0ull, 5ull, 1ull << 40}) {
    BOOST_TEST(philox_uniform(9, pos) == philox_uniform(9, pos, 0));
    BOOST_TEST(philox_uniform(9, pos, kDraftStream) != philox_uniform(9, pos, kAcceptStream));
    BOOST_TEST(philox_uniform(9, pos, kAcceptStream) != philox_uniform(9, pos, kResidualStream));
  }
}

BOOST_AUTO_TEST_CASE(sampled_tokens_have_the_target_distribution) {
  const int n = 40000;
  // Draft and target disagree a lot: mass moved between tokens, one token the draft never proposes.
  const std::vector<double> pp = {0.02, 0.30, 0.05, 0.18, 0.10, 0.08, 0.12, 0.15};
  const std::vector<double> qp = {0.25, 0.05, 0.20, 0.18, 0.0, 0.12, 0.05, 0.15};
  const std::vector<float> target = logits_of(pp), draft = logits_of(qp);
  SamplingParams sp;
  sp.temperature = 1;
  sp.position = 33;
  const Trial t = run(target, draft, sp, n);
  const Candidates pc = sampling_candidates(target.data(), 8, sp), qc = sampling_candidates(draft.data(), 8, sp);
  check_matches_target(t, pc, n);
  // The acceptance rate is sum min(p, q) (binomial: within 5 sigma).
  const double a = overlap(pc, qc), sigma = std::sqrt(a * (1 - a) / n);
  BOOST_TEST_MESSAGE("acceptance " << double(t.accepted) / n << " expected " << a);
  BOOST_TEST(std::abs(double(t.accepted) / n - a) < 5 * sigma);
}

BOOST_AUTO_TEST_CASE(filters_and_temperature_apply_to_both) {
  const int n = 40000;
  // top-k 4 and top-p: the draft's candidates include tokens the target's exclude.
  const std::vector<double> pp = {0.30, 0.25, 0.15, 0.12, 0.08, 0.05, 0.03, 0.02};
  const std::vector<double> qp = {0.05, 0.10, 0.30, 0.02, 0.25, 0.20, 0.05, 0.03};
  const std::vector<float> target = logits_of(pp), draft = logits_of(qp);
  for (const auto& [temp, k, top_p] : std::vector<std::tuple<float, int, float>>{{0.7f, 4, 1.0f}, {1.3f, 0, 0.8f}}) {
    SamplingParams sp;
    sp.temperature = temp;
    sp.top_k = k;
    sp.top_p = top_p;
    sp.position = 7;
    BOOST_TEST_CONTEXT("temperature " << temp << " top_k " << k << " top_p " << top_p) {
      const Trial t = run(target, draft, sp, n);
      check_matches_target(t, sampling_candidates(target.data(), 8, sp), n);
    }
  }
}

BOOST_AUTO_TEST_CASE(detects_a_wrong_rule) {
  // The test's power: accepting every draft yields q, not p, and the chi-square says so.
  const int n = 40000;
  const std::vector<double> pp = {0.4, 0.3, 0.2, 0.1}, qp = {0.1, 0.2, 0.3, 0.4};
  const std::vector<float> target = logits_of(pp), draft = logits_of(qp);
  SamplingParams sp;
  sp.temperature = 1;
  const Candidates pc = sampling_candidates(target.data(), 4, sp);
  std::map<int32_t, int64_t> counts;
  for (int s = 0; s < n; ++s) {
    sp.seed = uint64_t(s);
    Candidates q;
    ++counts[draft_token(draft.data(), 4, sp, &q)];
  }
  double chi2 = 0;
  for (size_t i = 0; i < pc.tokens.size(); ++i) {
    const double e = pc.probs[i] * n, o = double(counts[pc.tokens[i]]);
    chi2 += (o - e) * (o - e) / e;
  }
  BOOST_TEST(chi2 > chi2_critical(3));
}
