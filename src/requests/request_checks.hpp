// The passes over a whole request file before a run (see request_checks.cpp).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "requests/jsonl.hpp"
#include "requests/request.hpp"
#include "requests/resume.hpp"
#include "text/text_codec.hpp"

namespace trillion {

// Fills prompt_token_ids of text and messages requests through `codec`
// (null: none); a request that needs what the codec lacks, whose prompt
// renders or encodes to nothing, or longer than `max_len` or with ids
// outside the vocabulary becomes an error. So does a request with `stop`
// strings when the codec has no text stream (they are matched on the text).
void tokenize_prompts(std::vector<Parsed<GenerateRequest>>& requests, const TextCodec* codec, int64_t vocab_size,
                      int64_t max_len);

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
// "response": null, "error": {"code", "message", "line"}}. `code` tells a
// line that could not run ("invalid_request") from one that failed while
// running ("request_failed").
nlohmann::json error_record(const RequestError& e, const char* code = "invalid_request");

// The good requests, in file order; each bad line is reported on stderr as
// "<command>: <file> line N: message" and written to `out` as an error record.
template <class R>
std::vector<const R*> runnable_requests(const std::vector<Parsed<R>>& parsed, JsonlWriter& out,
                                        const std::string& command, const std::string& file, int64_t* errors);

}  // namespace trillion
