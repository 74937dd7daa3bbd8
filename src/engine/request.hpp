// Requests of the token-level commands, parsed from JSONL with their line
// numbers. A bad line becomes a RequestError (reported in the result file),
// never an abort of the whole job.
#pragma once
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "engine/jsonl.hpp"

namespace trillion {

struct RequestError {
  int64_t line = 0;
  std::string id;       // empty when the line had no usable id
  std::string message;
};

// `trillion score`: {"id": "...", "token_ids": [...]}
struct ScoreRequest {
  int64_t line = 0;
  std::string id;
  std::vector<int32_t> token_ids;
};

// `trillion generate`: {"id": "...", "prompt_token_ids": [...], "max_tokens": N}
struct GenerateRequest {
  int64_t line = 0;
  std::string id;
  std::vector<int32_t> prompt_token_ids;
  int64_t max_tokens = 16;
};

template <class R>
using Parsed = std::variant<R, RequestError>;

// `vocab_size` bounds token ids; `max_len` bounds sequence lengths (positions).
Parsed<ScoreRequest> parse_score_request(const JsonlLine& line, int64_t vocab_size, int64_t max_len);
Parsed<GenerateRequest> parse_generate_request(const JsonlLine& line, int64_t vocab_size,
                                               int64_t max_len);

// Marks later lines that repeat an earlier id as errors (ids key the results).
template <class R>
void reject_duplicate_ids(std::vector<Parsed<R>>& requests);

// The result record for a bad line.
nlohmann::json error_record(const RequestError& e);

// The good requests, in file order; each bad line is reported on stderr as
// "<command>: <file> line N: message" and written to `out` as an error record.
template <class R>
std::vector<const R*> runnable_requests(const std::vector<Parsed<R>>& parsed, JsonlWriter& out,
                                        const std::string& command, const std::string& file, int64_t* errors);

}  // namespace trillion
