// Result records: `trillion generate`'s in the form of their request: the
// plain {"id", "token_ids", "finish_reason", "usage", ...} or OpenAI's batch
// output {"id", "custom_id", "response": {"status_code": 200, "request_id",
// "body": {"id", "object", "created", "model", "choices", "usage"}}, "error": null}.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "requests/results.hpp"
#include "text/text_codec.hpp"

namespace trillion {

struct ResultContext {
  std::string model;      // the model's name, when a request names none
  int64_t created = 0;    // unix seconds of the run
  TextCodec::Decode decode;  // empty when the model has no tokenizer (texts are then null)
};

nlohmann::json result_record(const GenerationResult& r, const ResultContext& ctx);

// `trillion score`'s record {"id", "num_tokens", "token_logprobs",
// "total_logprob", "greedy_token_ids"}, or the error record of a request that
// failed (its logits file could not be written).
nlohmann::json score_record(const ScoreResult& r);

}  // namespace trillion
