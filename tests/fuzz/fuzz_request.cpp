// A request file (JSONL), read by read_jsonl_lines, every line parsed as a
// `generate` request (plain and OpenAI Batch forms) and a `score` request.
// The parsers promise a RequestError for a bad line, never an exception, and
// token ids inside the vocabulary for a good one.
#include "fuzz_util.hpp"
#include "requests/request.hpp"

namespace {

constexpr int64_t kVocab = 1000;
constexpr int64_t kMaxLen = 64;

bool ids_ok(const std::vector<int32_t>& ids) {
  for (int32_t id : ids)
    if (id < 0 || id >= kVocab) return false;
  return int64_t(ids.size()) <= kMaxLen;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trillion;
  const std::string path = fuzz::write_scratch("requests.jsonl", fuzz::as_text(data, size));
  std::vector<JsonlLine> lines;
  fuzz::expect_clean([&] { lines = read_jsonl_lines(path); });
  for (const JsonlLine& line : lines) {
    auto g = parse_generate_request(line, kVocab, kMaxLen);
    if (auto* r = std::get_if<GenerateRequest>(&g); r && (!ids_ok(r->prompt_token_ids) || r->id.empty()))
      __builtin_trap();
    auto s = parse_score_request(line, kVocab, kMaxLen);
    if (auto* r = std::get_if<ScoreRequest>(&s); r && (!ids_ok(r->token_ids) || r->id.empty())) __builtin_trap();
  }
  return 0;
}
