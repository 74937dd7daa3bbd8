#define BOOST_TEST_MODULE sampler
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sampling/philox.hpp"
#include "requests/request.hpp"
#include "sampling/sampler.hpp"

using namespace trillion;

namespace {

// Logits whose softmax is exactly `probs` (up to float rounding).
std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(float(std::log(p)));
  return l;
}

const std::vector<double> kProbs = {0.1, 0.4, 0.2, 0.3};  // most likely: 1, 3, 2, 0

SamplingParams sampled(float temperature) {
  SamplingParams p;
  p.temperature = temperature;
  p.seed = 12345;
  return p;
}

// Pearson's chi-square of `n` draws at positions 0..n-1 against `want`
// (probabilities per token id; ids outside must never be drawn).
double chi_square(const std::vector<float>& logits, SamplingParams p, const std::map<int32_t, double>& want, int n) {
  std::map<int32_t, int> count;
  for (int i = 0; i < n; ++i) {
    p.position = i;
    ++count[sample_token(logits.data(), int64_t(logits.size()), p).token];
  }
  double chi2 = 0;
  for (auto [tok, c] : count)
    if (!want.count(tok)) return 1e9;  // drew a token the filters exclude
  for (auto [tok, q] : want) {
    const double e = q * n;
    const double d = count[tok] - e;
    chi2 += d * d / e;
  }
  return chi2;
}

}  // namespace

// Random123's published known-answer vectors (kat_vectors, "philox4x32 10").
BOOST_AUTO_TEST_CASE(philox_known_answers) {
  BOOST_TEST((philox4x32_10({0, 0, 0, 0}, {0, 0}) == PhiloxCounter{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  BOOST_TEST((philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}) ==
              PhiloxCounter{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  BOOST_TEST((philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}) ==
              PhiloxCounter{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

BOOST_AUTO_TEST_CASE(uniforms_are_in_range_and_spread) {
  double sum = 0;
  for (uint64_t i = 0; i < 10000; ++i) {
    const double u = philox_uniform(7, i);
    BOOST_REQUIRE(u >= 0.0);
    BOOST_REQUIRE(u < 1.0);
    sum += u;
  }
  BOOST_TEST(std::abs(sum / 10000 - 0.5) < 0.015);  // 5 standard errors
  BOOST_TEST(philox_uniform(7, 3) != philox_uniform(8, 3));
}

BOOST_AUTO_TEST_CASE(uniform_known_answers) {
  // philox_uniform(seed, position) is the top 53 bits of words 0 and 1 of the
  // block at counter {position lo, position hi, 0, 0}, key {seed lo, seed hi},
  // times 2^-53 (engine/philox.hpp). Seed 0 at position 0 is Random123's first
  // known-answer vector, so its uniform follows from that vector alone:
  const uint64_t kat_bits = (uint64_t(0x6627e8d5) << 32 | 0xe169c58d) >> 11;
  BOOST_TEST(philox_uniform(0, 0) == double(kat_bits) * 0x1.0p-53);
  BOOST_TEST(philox_uniform(0, 0) == 0x1.989fa35785a70p-2);
  // Values from an independent Python Philox4x32-10 (checked against the three
  // vectors above) and the same mapping; the second puts bits in every word
  // of counter and key, so a swapped or dropped high word shows.
  BOOST_TEST(philox_uniform(7, 3) == 0x1.8f9058590021ap-2);
  BOOST_TEST(philox_uniform((uint64_t(1) << 32) + 5, (uint64_t(1) << 33) + 1) == 0x1.a8f901521e190p-2);
}

BOOST_AUTO_TEST_CASE(filters_by_hand) {
  const auto l = logits_of(kProbs);
  auto cand = [&](SamplingParams p) { return sampling_candidates(l.data(), 4, p); };
  auto p = sampled(1);
  Candidates c = cand(p);
  BOOST_TEST((c.tokens == std::vector<int32_t>{1, 3, 2, 0}));
  BOOST_TEST(c.probs[0] == 0.4, boost::test_tools::tolerance(1e-6));

  p.top_k = 2;  // the two most likely, renormalized
  c = cand(p);
  BOOST_TEST((c.tokens == std::vector<int32_t>{1, 3}));
  BOOST_TEST(c.probs[0] == 4.0 / 7, boost::test_tools::tolerance(1e-6));

  p = sampled(1);
  p.top_p = 0.39f;  // the most likely (0.4) alone reaches it
  BOOST_TEST((cand(p).tokens == std::vector<int32_t>{1}));
  p.top_p = 0.6f;  // 0.4 + 0.3
  BOOST_TEST((cand(p).tokens == std::vector<int32_t>{1, 3}));
  p.top_p = 0.75f;  // 0.4 + 0.3 + 0.2
  BOOST_TEST((cand(p).tokens == std::vector<int32_t>{1, 3, 2}));

  p = sampled(1);
  p.min_p = 0.6f;  // p >= 0.24
  BOOST_TEST((cand(p).tokens == std::vector<int32_t>{1, 3}));
  p.min_p = 0.2f;  // p >= 0.08: all
  BOOST_TEST(cand(p).tokens.size() == 4u);

  p = sampled(2);  // temperature 2: probabilities proportional to sqrt(p)
  c = cand(p);
  const double z = std::sqrt(0.1) + std::sqrt(0.4) + std::sqrt(0.2) + std::sqrt(0.3);
  BOOST_TEST(c.probs[0] == std::sqrt(0.4) / z, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(c.probs[3] == std::sqrt(0.1) / z, boost::test_tools::tolerance(1e-6));

  // Ties: the lower id first, so top-k is well defined.
  const std::vector<float> tie = {1, 2, 2, 0};
  p = sampled(1);
  p.top_k = 1;
  BOOST_TEST((sampling_candidates(tie.data(), 4, p).tokens == std::vector<int32_t>{1}));
}

BOOST_AUTO_TEST_CASE(draws_follow_the_distribution) {
  // Chi-square with 3 (or fewer) degrees of freedom: 16.3 is the 0.1% critical
  // value; the seeds are fixed, so the test is deterministic.
  const auto l = logits_of(kProbs);
  const int n = 20000;
  BOOST_TEST(chi_square(l, sampled(1), {{0, 0.1}, {1, 0.4}, {2, 0.2}, {3, 0.3}}, n) < 16.3);
  const double z = std::sqrt(0.1) + std::sqrt(0.4) + std::sqrt(0.2) + std::sqrt(0.3);
  BOOST_TEST(chi_square(l, sampled(2), {{0, std::sqrt(0.1) / z}, {1, std::sqrt(0.4) / z}, {2, std::sqrt(0.2) / z},
                                        {3, std::sqrt(0.3) / z}}, n) < 16.3);
  auto p = sampled(1);
  p.top_k = 3;
  BOOST_TEST(chi_square(l, p, {{1, 0.4 / 0.9}, {3, 0.3 / 0.9}, {2, 0.2 / 0.9}}, n) < 16.3);
  p = sampled(1);
  p.top_p = 0.6f;
  BOOST_TEST(chi_square(l, p, {{1, 4.0 / 7}, {3, 3.0 / 7}}, n) < 16.3);
  p = sampled(1);
  p.min_p = 0.6f;
  p.seed = 99;
  BOOST_TEST(chi_square(l, p, {{1, 4.0 / 7}, {3, 3.0 / 7}}, n) < 16.3);
}

BOOST_AUTO_TEST_CASE(same_seed_and_position_same_token) {
  std::vector<float> l(1000);
  for (size_t i = 0; i < l.size(); ++i) l[i] = float(std::sin(double(i)) * 3);
  auto p = sampled(1);
  int differ = 0;
  for (int pos = 0; pos < 50; ++pos) {
    p.position = pos;
    p.seed = 5;
    const int32_t a = sample_token(l.data(), 1000, p).token;
    BOOST_TEST(a == sample_token(l.data(), 1000, p).token);
    p.seed = 6;
    differ += a != sample_token(l.data(), 1000, p).token;
  }
  BOOST_TEST(differ > 25);
}

BOOST_AUTO_TEST_CASE(greedy_and_logprobs) {
  const auto l = logits_of(kProbs);
  SamplingParams p;  // temperature 0: greedy
  BOOST_TEST(sample_token(l.data(), 4, p).token == 1);
  BOOST_TEST(sample_token(l.data(), 4, p).top.empty());
  p.logprobs = 1;
  p.top_logprobs = 2;
  const Sample s = sample_token(l.data(), 4, p);
  BOOST_TEST(s.logprob == std::log(0.4), boost::test_tools::tolerance(1e-5));
  BOOST_REQUIRE(s.top.size() == 2u);
  BOOST_TEST(s.top[0].token == 1);
  BOOST_TEST(s.top[1].token == 3);
  BOOST_TEST(s.top[1].logprob == std::log(0.3), boost::test_tools::tolerance(1e-5));
  // With sampling, the logprob is of the raw distribution, whatever the filters.
  p.temperature = 5;
  p.top_k = 1;
  const Sample t = sample_token(l.data(), 4, p);
  BOOST_TEST(t.token == 1);
  BOOST_TEST(t.logprob == std::log(0.4), boost::test_tools::tolerance(1e-5));
}

BOOST_AUTO_TEST_CASE(default_seed_comes_from_the_id) {
  // Without "seed", the seed is the 64-bit FNV-1a hash of the id (engine/request.cpp):
  // the published FNV-1a test vectors give the expected values.
  auto seed_of_id = [](const std::string& id) { return parse_sampling(nlohmann::json::object(), id).seed; };
  BOOST_TEST(seed_of_id("") == 0xcbf29ce484222325u);  // the offset basis
  BOOST_TEST(seed_of_id("a") == 0xaf63dc4c8601ec8cu);
  BOOST_TEST(seed_of_id("foobar") == 0x85944171f73967e8u);
  // The same id (another string object) gives the same seed; other ids others.
  BOOST_TEST(seed_of_id(std::string("req-") + "17") == seed_of_id("req-17"));
  BOOST_TEST(seed_of_id("req-17") != seed_of_id("req-18"));
  BOOST_TEST(seed_of_id("a") != seed_of_id("b"));
  // An explicit seed wins over the id.
  BOOST_TEST(parse_sampling(nlohmann::json::parse(R"({"seed": 9})"), "a").seed == 9u);
  BOOST_TEST(parse_sampling(nlohmann::json::parse(R"({"seed": 9})"), "b").seed == 9u);
}

BOOST_AUTO_TEST_CASE(request_sampling_fields) {
  auto parse = [](const std::string& text) { return parse_sampling(nlohmann::json::parse(text), "id"); };
  auto err = [&](const std::string& text) {
    try {
      parse(text);
      return std::string("ok");
    } catch (const std::string& e) {
      return e;
    }
  };
  SamplingParams p = parse(R"({"temperature": 0.7, "top_k": 5, "top_p": 0.9, "min_p": 0.05, "seed": 3, "logprobs": 2})");
  BOOST_TEST(p.temperature == 0.7f);
  BOOST_TEST(p.top_k == 5);
  BOOST_TEST(p.seed == 3u);
  BOOST_TEST(p.logprobs == 1);
  BOOST_TEST(p.top_logprobs == 2);
  BOOST_TEST(parse(R"({"logprobs": true, "top_logprobs": 4})").top_logprobs == 4);
  BOOST_TEST(parse("{}").temperature == 0.0f);
  BOOST_TEST(err(R"({"temperature": -1})").find("temperature") != std::string::npos);
  BOOST_TEST(err(R"({"temperature": "hot"})").find("must be a number") != std::string::npos);
  BOOST_TEST(err(R"({"top_p": 0})").find("top_p") != std::string::npos);
  BOOST_TEST(err(R"({"min_p": 2})").find("min_p") != std::string::npos);
  BOOST_TEST(err(R"({"top_k": -3})").find("top_k") != std::string::npos);
  BOOST_TEST(err(R"({"seed": 1.5})").find("seed") != std::string::npos);
  BOOST_TEST(err(R"({"logprobs": 50})").find("logprobs") != std::string::npos);
}

// Vocabulary padding: lm_head rows past the tokenizer (ids >= token_limit)
// are out of the distribution. Here they hold the largest logits, so without
// the limit every choice below would land on them.
BOOST_AUTO_TEST_CASE(token_limit_masks_padding_ids) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 0.5f, 9.0f, 8.0f};  // ids 4, 5: padding
  SamplingParams p;
  p.token_limit = 4;
  p.logprobs = 1;
  p.top_logprobs = 3;
  const Sample g = sample_token(logits.data(), 6, p);
  BOOST_TEST(g.token == 1);  // the best id below the limit
  // log-softmax over ids 0..3 only, by hand
  const double lse = std::log(std::exp(1.0) + std::exp(3.0) + std::exp(2.0) + std::exp(0.5));
  BOOST_TEST(std::fabs(double(g.logprob) - (3.0 - lse)) < 1e-6);
  BOOST_TEST(g.top.size() == 3u);
  for (const TokenLogprob& t : g.top) BOOST_TEST(t.token < 4);
  BOOST_TEST(sample_token(logits.data(), 6, SamplingParams{}).token == 4);  // no limit: padding wins
  p.temperature = 5.0f;  // nearly uniform over the allowed ids: every draw stays below the limit
  std::map<int32_t, int> seen;
  for (int64_t pos = 0; pos < 2000; ++pos) {
    p.position = pos;
    ++seen[sample_token(logits.data(), 6, p).token];
  }
  BOOST_TEST(seen.size() == 4u);
  BOOST_TEST(seen.rbegin()->first == 3);
  const Candidates c = sampling_candidates(logits.data(), 6, p);
  for (int32_t t : c.tokens) BOOST_TEST(t < 4);
  BOOST_TEST(choosable(6, p) == 4);
  p.token_limit = 0;
  BOOST_TEST(choosable(6, p) == 6);
}

BOOST_AUTO_TEST_CASE(excluded_ids_are_never_chosen_but_keep_their_logprob) {
  // p = softmax([ln .1, ln .4, ln .2, ln .3]) = [.1, .4, .2, .3]; id 1 (the
  // most likely) is excluded, as the EOS ids are before a request's min_tokens.
  const std::vector<float> l = {std::log(0.1f), std::log(0.4f), std::log(0.2f), std::log(0.3f)};
  const std::vector<int64_t> eos = {1};
  SamplingParams p;
  p.logprobs = 1;
  p.top_logprobs = 1;
  const Sample g = sample_token(l.data(), 4, p, eos);
  BOOST_TEST(g.token == 3);  // greedy: the best of the rest
  BOOST_TEST(g.logprob == std::log(0.3), boost::test_tools::tolerance(1e-5));
  BOOST_REQUIRE(g.top.size() == 1u);
  BOOST_TEST(g.top[0].token == 1);  // alternatives are of the raw distribution
  BOOST_TEST(g.top[0].logprob == std::log(0.4), boost::test_tools::tolerance(1e-5));
  // Sampled: the rest renormalized to [1/6, 0, 2/6, 3/6]; 6000 draws stay off
  // id 1 and land near those shares (bounds ~6 standard deviations wide).
  p.temperature = 1;
  p.seed = 11;
  std::map<int32_t, int> seen;
  for (int64_t pos = 0; pos < 6000; ++pos) {
    p.position = pos;
    ++seen[sample_token(l.data(), 4, p, eos).token];
  }
  BOOST_TEST(seen.count(1) == 0u);
  BOOST_TEST(std::abs(seen[0] - 1000) < 180);
  BOOST_TEST(std::abs(seen[2] - 2000) < 220);
  BOOST_TEST(std::abs(seen[3] - 3000) < 240);
  // Excluding every id leaves the choice as it was (never a token outside the row).
  const std::vector<int64_t> all = {0, 1, 2, 3};
  p.temperature = 0;
  BOOST_TEST(sample_token(l.data(), 4, p, all).token == 1);
  // Ids outside the row are ignored.
  const std::vector<int64_t> outside = {-1, 4, 99};
  BOOST_TEST(sample_token(l.data(), 4, p, outside).token == 1);
}
