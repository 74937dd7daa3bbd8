// A compiled PCRE2 pattern (UTF + Unicode properties, JIT when available):
// the pre-tokenizer regexes of tokenizer.json and tiktoken.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace trillion {

class Regex {
 public:
  // Throws FormatError naming `source` (the file the pattern came from).
  Regex(const std::string& pattern, const std::string& source);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Calls on_match(begin, end) for each non-overlapping match in `text`,
  // left to right (byte offsets). `text` must be valid UTF-8.
  void find_all(std::string_view text, const std::function<void(size_t, size_t)>& on_match) const;

  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*
};

}  // namespace trillion
