#include "tokenizer/added_tokens.hpp"

namespace trillion {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_word(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u >= 0x80 || (u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || c == '_';
}

}  // namespace

void AddedTokens::add(AddedToken token) {
  if (token.content.empty()) return;
  int32_t node = 0;
  for (const char ch : token.content) {
    const uint64_t k = (uint64_t(node) << 8) | static_cast<unsigned char>(ch);
    auto it = children_.find(k);
    if (it == children_.end()) {
      it = children_.emplace(k, int32_t(terminal_.size())).first;
      terminal_.push_back(-1);
    }
    node = it->second;
  }
  first_byte_[static_cast<unsigned char>(token.content[0])] = true;
  if (terminal_[size_t(node)] >= 0) {
    tokens_[size_t(terminal_[size_t(node)])] = std::move(token);  // same content: the later entry wins
  } else {
    terminal_[size_t(node)] = int32_t(tokens_.size());
    tokens_.push_back(std::move(token));
  }
}

int AddedTokens::longest_at(std::string_view text, size_t pos, bool allow_special) const {
  int best = -1;
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto it = children_.find((uint64_t(node) << 8) | static_cast<unsigned char>(text[i]));
    if (it == children_.end()) break;
    node = it->second;
    const int t = terminal_[size_t(node)];
    if (t < 0) continue;
    const AddedToken& tok = tokens_[size_t(t)];
    if (tok.special && !allow_special) continue;
    if (tok.single_word && ((pos > 0 && is_word(text[pos - 1])) || (i + 1 < text.size() && is_word(text[i + 1]))))
      continue;
    best = t;
  }
  return best;
}

void AddedTokens::split(std::string_view text, bool allow_special, std::vector<Segment>& out) const {
  size_t plain = 0;  // start of the pending plain-text run
  for (size_t pos = 0; pos < text.size();) {
    const int t = first_byte_[static_cast<unsigned char>(text[pos])] ? longest_at(text, pos, allow_special) : -1;
    if (t < 0) {
      ++pos;
      continue;
    }
    const AddedToken& tok = tokens_[size_t(t)];
    size_t begin = pos, end = pos + tok.content.size();
    if (tok.lstrip)
      while (begin > plain && is_space(text[begin - 1])) --begin;
    if (tok.rstrip)
      while (end < text.size() && is_space(text[end])) ++end;
    if (begin > plain) out.push_back({text.substr(plain, begin - plain), -1});
    out.push_back({text.substr(begin, end - begin), tok.id});
    pos = plain = end;
  }
  if (plain < text.size()) out.push_back({text.substr(plain), -1});
}

}  // namespace trillion
