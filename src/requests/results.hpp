// What a run gives back for a request, before it becomes a result record
// (result_format.hpp): the scheduler fills a GenerationResult, the scorer a
// ScoreResult.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "requests/request.hpp"
#include "sampling/sampler.hpp"

namespace trillion {

struct GenerationResult {
  const GenerateRequest* request = nullptr;
  std::vector<int32_t> token_ids;  // generated ids (EOS included when it ended the sequence)
  std::vector<float> logprobs;     // [token_ids] when the request asked for logprobs, else empty
  std::vector<std::vector<TokenLogprob>> top_logprobs;  // [token_ids] when it asked for top_logprobs
  std::string finish_reason;       // "stop" (EOS or a stop string) | "length" (max_tokens or context)
  // Requests with stop strings: the text, cut right before the stop string
  // (token_ids then end with the token that completed it). Unset otherwise:
  // the text is the decoded token_ids.
  std::optional<std::string> text;
  // Non-empty: the request failed while it ran (its record is an error
  // record; the job goes on). token_ids then holds what was generated.
  std::string error;
};

struct ScoreResult {
  const ScoreRequest* request = nullptr;
  std::vector<double> token_logprobs;  // [T-1]: log p(token[t+1] | tokens[0..t])
  std::vector<int32_t> greedy_ids;     // [T]: argmax after each token
  std::string error;                   // non-empty: the request failed (e.g. unwritable logits file)
  // Positions whose token id the tokenizer does not have (vocabulary
  // padding): scored under the model's distribution all the same.
  std::vector<int64_t> unknown_positions;
};

}  // namespace trillion
