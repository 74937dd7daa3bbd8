#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.hpp"

#include <pcre2.h>

#include "common/error.hpp"

namespace trillion {

namespace {

// One match-data block per thread: encode() may run on many threads at once.
struct MatchData {
  pcre2_match_data* data = pcre2_match_data_create(16, nullptr);
  ~MatchData() { pcre2_match_data_free(data); }
};

}  // namespace

Regex::Regex(const std::string& pattern, const std::string& source) : pattern_(pattern) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &offset, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    throw FormatError(source + ": bad pre-tokenizer regex at offset " + std::to_string(offset) + ": " +
                      reinterpret_cast<const char*>(msg) + " in /" + pattern + "/");
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter on failure
  code_ = code;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

void Regex::find_all(std::string_view text, const std::function<void(size_t, size_t)>& on_match) const {
  thread_local MatchData md;
  auto* code = static_cast<pcre2_code*>(code_);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  while (start <= text.size()) {
    const int rc = pcre2_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, md.data, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) return;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      throw Error(std::string("regex match failed: ") + reinterpret_cast<const char*>(msg));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.data);
    const size_t b = ov[0], e = ov[1];
    if (e > b) {
      on_match(b, e);
      start = e;
    } else {  // empty match: step over one character
      start = b + 1;
      while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) ++start;
    }
  }
}

}  // namespace trillion
