// Choosing the next token from a row of logits: greedy, or a draw from the
// temperature-scaled distribution narrowed by top-k, top-p and min-p, with the
// random number from Philox keyed by (seed, position). The result is a pure
// function of (logits, params), so it is the same on every rank and in every
// batch (docs/determinism.md).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace trillion {

// Per logit row of a step. Plain data (it travels between ranks as bytes).
struct SamplingParams {
  float temperature = 0;   // 0: greedy (argmax, lowest id on ties)
  float top_p = 1;         // keep the smallest most-likely set with mass >= top_p
  float min_p = 0;         // keep tokens with p >= min_p * p(most likely)
  int32_t top_k = 0;       // keep the k most likely (0: all)
  uint64_t seed = 0;       // key of the random stream
  int64_t position = 0;    // position of the token being chosen: the counter
  int32_t logprobs = 0;    // 1: return the chosen token's log-probability
  int32_t top_logprobs = 0;  // also return this many most likely alternatives
  // Ids [0, token_limit) only (0: the whole vocabulary). The real checkpoints
  // pad lm_head past the tokenizer's last id (DeepSeek-V3: 129280 rows, 128815
  // tokens): those ids have no text, so they are masked out of the
  // distribution (never chosen, greedy or sampled; logprobs over the rest).
  int32_t token_limit = 0;
  // 1: the model's EOS ids are never chosen (a request's `min_tokens` not yet
  // reached, as vLLM masks them); logprobs stay those of the raw distribution.
  // Also keeps the size a multiple of 8 (it travels between ranks as bytes).
  int32_t mask_eos = 0;
};
static_assert(std::is_trivially_copyable_v<SamplingParams> && sizeof(SamplingParams) == 48);

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;  // log_softmax of the raw logits (before temperature and filters)
};
static_assert(std::is_trivially_copyable_v<TokenLogprob> && sizeof(TokenLogprob) == 8);

struct Sample {
  int32_t token = 0;
  float logprob = 0;                     // of `token`, when params.logprobs or top_logprobs
  std::vector<TokenLogprob> top;         // [top_logprobs] most likely first (ties: lower id)
};

// The candidates that survive temperature, top-k, top-p and min-p, most
// likely first (ties: lower id), with their renormalized probabilities.
struct Candidates {
  std::vector<int32_t> tokens;
  std::vector<double> probs;  // sums to 1
};
// Ids past p.token_limit are never candidates.
Candidates sampling_candidates(const float* logits, int64_t vocab, const SamplingParams& p);
// The ids a choice ranges over: [0, min(vocab, p.token_limit)), or all of them.
int64_t choosable(int64_t vocab, const SamplingParams& p);

// `never`: ids that are not chosen, greedy or sampled (the caller passes the
// EOS ids when p.mask_eos); the logprobs are still of the unmasked logits.
Sample sample_token(const float* logits, int64_t vocab, const SamplingParams& p,
                    std::span<const int64_t> never = {});
// Fills s.logprob and s.top for the already chosen s.token, when p asks.
void add_logprobs(const float* logits, int64_t vocab, const SamplingParams& p, Sample& s);

// Checks a request's parameters; returns an error message or "" when valid.
std::string sampling_params_error(const SamplingParams& p);

}  // namespace trillion
