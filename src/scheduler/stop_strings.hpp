// `stop` strings: generation ends where the detokenized text first contains
// one, and the text is cut right before it. Detection runs on rank 0 (the
// scheduler's rank) over the text stream of the generated tokens; the scheduler
// sees the tokenizer only through a TokenTextStream (text/text_codec.hpp), so
// it stays independent of it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace trillion {

// Finds the first stop string in a growing text. After each push the text
// splits into an emitted part (cannot belong to any stop string, whatever
// comes next) and a held-back tail (a prefix of some stop string), so nothing
// past a later cut is ever emitted. When several stop strings complete with
// the same piece, the one starting earliest wins.
class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);  // non-empty strings
  bool push(const std::string& piece);  // true once a stop string has appeared (text() is then final)
  bool stopped() const { return stopped_; }
  // Text before a request's min_tokens: emitted as it is, never matched; a
  // later match must begin after it.
  void pass(const std::string& piece);
  // Ends the text without a stop: the held-back tail is emitted.
  void finish() { emitted_ = text_.size(); }
  // The text up to the cut (stopped) or everything emitted so far.
  std::string text() const { return text_.substr(0, emitted_); }
  size_t held_back() const { return text_.size() - emitted_; }

 private:
  std::vector<std::string> stops_;
  size_t longest_ = 0;
  std::string text_;
  size_t emitted_ = 0;
  size_t armed_ = 0;  // matches begin at or after this offset (the end of pass()'s text)
  bool stopped_ = false;
};

}  // namespace trillion
