// Pre-tokenization: a sequence of regex splits (tokenizer.json's `Split`
// pre-tokenizers, ByteLevel's GPT-2 regex, tiktoken's pattern). Each step
// splits every piece the previous step produced; BPE then runs per piece.
#pragma once
#include <memory>
#include <string_view>
#include <vector>

#include "tokenizer/regex.hpp"

namespace trillion {

// What a Split does with the matches (Hugging Face SplitDelimiterBehavior).
enum class SplitBehavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

// Throws FormatError naming `source` for an unknown name.
SplitBehavior parse_split_behavior(std::string_view name, const std::string& source);

struct SplitStep {
  std::shared_ptr<const Regex> regex;
  SplitBehavior behavior = SplitBehavior::isolated;
  bool invert = false;  // the non-matches are the delimiters
};

class Pretokenizer {
 public:
  void add(SplitStep step) { steps_.push_back(std::move(step)); }
  bool empty() const { return steps_.empty(); }

  // Appends the pieces of `text` (views into it, never empty) to `out`.
  void split(std::string_view text, std::vector<std::string_view>& out) const;

 private:
  std::vector<SplitStep> steps_;
};

}  // namespace trillion
