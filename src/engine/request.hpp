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

#include "engine/jsonl.hpp"
#include "engine/resume.hpp"
#include "engine/sampler.hpp"

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
  SamplingParams sampling;  // position is set per token by the generator
  bool needs_tokenizer() const { return prompt_token_ids.empty() && (has_text || !messages.is_null()); }
};

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

// How text becomes token ids: the model's tokenizer and chat template, as
// callbacks so the engine does not depend on them. Either may be empty.
struct PromptCodec {
  std::function<std::vector<int32_t>(const std::string& text)> encode;  // special tokens recognized, no BOS
  std::function<std::string(const nlohmann::json& messages)> render_chat;  // with the generation prompt
  // Prepended to plain text prompts (tokenizer_config.json add_bos_token);
  // a rendered chat carries its own BOS.
  std::optional<int32_t> text_bos;
  bool can_decode = false;  // generated ids can become text (needed by `stop` strings)
};

// Fills prompt_token_ids of text and messages requests through `codec`
// (null: none); a request that needs what the codec lacks, whose prompt
// renders or encodes to nothing, or longer than `max_len` or with ids
// outside the vocabulary becomes an error. So does a request with `stop`
// strings when the codec cannot decode (they are matched on the text).
void tokenize_prompts(std::vector<Parsed<GenerateRequest>>& requests, const PromptCodec* codec, int64_t vocab_size,
                      int64_t max_len);

// KV-cache positions a request may fill: its prompt and max_tokens, capped
// at the context (the generator reserves them at admission).
inline int64_t kv_positions(const GenerateRequest& r, int64_t max_len) {
  return std::min<int64_t>(int64_t(r.prompt_token_ids.size()) + r.max_tokens, max_len);
}

// Marks requests that need more KV-cache blocks than a pool holds (they
// could never be admitted) as errors.
void reject_unfittable(std::vector<Parsed<GenerateRequest>>& requests, int64_t max_len, int32_t block_tokens,
                       int64_t pool_blocks);

// Bad lines that were not JSON objects are answered in the file's form: that
// of its first good (or at least recognizable) line.
void settle_error_forms(std::vector<Parsed<GenerateRequest>>& requests);

// Marks later lines that repeat an earlier id as errors (ids key the results).
template <class R>
void reject_duplicate_ids(std::vector<Parsed<R>>& requests);

// Drops the requests (and bad lines) that already have a record in the
// result file of an earlier run; returns how many were dropped.
template <class R>
int64_t drop_finished(std::vector<Parsed<R>>& requests, const FinishedResults& finished);

// The first bad line as an InputError message ("<file> line N: message"), for --strict; "" when none.
template <class R>
std::string first_error(const std::vector<Parsed<R>>& requests, const std::string& file);

// The result record for a bad line, in the line's form: plain
// {"id", "error": {"line", "message"}}; OpenAI {"id", "custom_id",
// "response": null, "error": {"code", "message", "line"}}.
nlohmann::json error_record(const RequestError& e);

// The good requests, in file order; each bad line is reported on stderr as
// "<command>: <file> line N: message" and written to `out` as an error record.
template <class R>
std::vector<const R*> runnable_requests(const std::vector<Parsed<R>>& parsed, JsonlWriter& out,
                                        const std::string& command, const std::string& file, int64_t* errors);

}  // namespace trillion
