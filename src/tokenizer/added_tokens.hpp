// Added and special tokens (tokenizer.json `added_tokens`, tiktoken's special
// tokens): found in the text before pre-tokenization, leftmost-longest, and
// emitted as single ids; the text between them goes through BPE.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace trillion {

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;      // skipped by encode(allow_special = false)
  bool lstrip = false;       // the match swallows whitespace on its left
  bool rstrip = false;       // ... and on its right
  bool single_word = false;  // matches only between word boundaries
};

class AddedTokens {
 public:
  void add(AddedToken token);
  bool empty() const { return tokens_.empty(); }
  const std::vector<AddedToken>& tokens() const { return tokens_; }

  // A run of plain text (id < 0) or one added token.
  struct Segment {
    std::string_view text;
    int32_t id = -1;
  };
  // Splits `text` into segments; special tokens are matched only when
  // allow_special is set (otherwise they are plain text).
  void split(std::string_view text, bool allow_special, std::vector<Segment>& out) const;

 private:
  // Longest allowed token starting at `pos`: index into tokens_, or -1.
  int longest_at(std::string_view text, size_t pos, bool allow_special) const;

  std::vector<AddedToken> tokens_;
  // A byte trie: node 0 is the root; children keyed by (node << 8 | byte).
  std::unordered_map<uint64_t, int32_t> children_;
  std::vector<int32_t> terminal_{-1};  // [node] index into tokens_, or -1
  bool first_byte_[256] = {};
};

}  // namespace trillion
