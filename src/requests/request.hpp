// Requests of the token-level commands, parsed from JSONL with their line
// numbers. A bad line becomes a RequestError (reported in the result file),
// never an abort of the whole job.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "requests/jsonl.hpp"
#include "sampling/sampler.hpp"

namespace trillion {

// The two request-file forms; each result is written in its request's form.
enum class RequestForm {
  plain,              // {"id", "prompt_token_ids" | "prompt" | "messages", ...}
  openai_completion,  // OpenAI Batch, "url": "/v1/completions"
  openai_chat,        // OpenAI Batch, "url": "/v1/chat/completions"
};

struct RequestError {
  int64_t line = 0;
  std::string id;       // empty when the line had no usable id ("custom_id" in the OpenAI form)
  std::string message;
  RequestForm form = RequestForm::plain;
  bool form_known = false;  // false: the line was not even a JSON object
};

// `trillion score`: {"id": "...", "token_ids": [...]}
struct ScoreRequest {
  int64_t line = 0;
  std::string id;
  std::vector<int32_t> token_ids;
};

// `trillion generate`: one line of either form. A prompt arrives as token ids,
// as text, or as chat messages; text and messages are turned into token ids
// by the model's tokenizer and chat template before the run
// (prompt_token_ids is then filled and prompt_text / messages kept for echo).
struct GenerateRequest {
  int64_t line = 0;
  std::string id;  // "id" (plain) or "custom_id" (OpenAI)
  RequestForm form = RequestForm::plain;
  std::vector<int32_t> prompt_token_ids;
  std::string prompt_text;          // a text prompt (has_text)
  bool has_text = false;
  nlohmann::json messages;          // chat messages (array) or null
  std::vector<std::string> stop;    // stop strings (need the tokenizer to detect)
  std::string model;                // OpenAI "body.model", echoed in the response
  int64_t max_tokens = 16;
  // As vLLM: EOS does not end the sequence (ignore_eos); before min_tokens
  // generated tokens EOS is masked from the choice and stop strings are not
  // matched. So a benchmark's requests generate exactly the lengths they ask for.
  bool ignore_eos = false;
  int64_t min_tokens = 0;
  SamplingParams sampling;  // position is set per token by the scheduler
  bool needs_tokenizer() const { return prompt_token_ids.empty() && (has_text || !messages.is_null()); }
};

// FNV-1a (64-bit) of a request id: the default seed of a request without one
// (reruns reproduce, different ids draw differently) and the tag of its
// OpenAI response ids. Changing it changes every default seed.
uint64_t id_hash(const std::string& id);

// Sampling fields of a request object (temperature, top_p, top_k, min_p, seed,
// logprobs, top_logprobs); a missing seed defaults to a hash of the id.
// Throws std::string with the message of a bad field.
SamplingParams parse_sampling(const nlohmann::json& j, const std::string& id);

template <class R>
using Parsed = std::variant<R, RequestError>;

// `vocab_size` bounds token ids; `max_len` bounds sequence lengths (positions).
Parsed<ScoreRequest> parse_score_request(const JsonlLine& line, int64_t vocab_size, int64_t max_len);
Parsed<GenerateRequest> parse_generate_request(const JsonlLine& line, int64_t vocab_size,
                                               int64_t max_len);

}  // namespace trillion
