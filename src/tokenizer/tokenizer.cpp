#include "tokenizer/tokenizer.hpp"

#include "common/error.hpp"
#include "tokenizer/byte_level.hpp"

namespace trillion {

Tokenizer::Tokenizer(std::string source, Pretokenizer pre, BpeModel bpe, AddedTokens added)
    : source_(std::move(source)), pre_(std::move(pre)), bpe_(std::move(bpe)), added_(std::move(added)) {
  tokens_ = bpe_.tokens();
  for (const auto& t : added_.tokens()) {
    if (t.id < 0) throw FormatError(source_ + ": negative token id for '" + t.content + "'");
    if (size_t(t.id) >= tokens_.size()) tokens_.resize(size_t(t.id) + 1);
    tokens_[size_t(t.id)] = t.content;
  }
  special_.assign(tokens_.size(), false);
  for (const auto& t : added_.tokens()) {
    special_[size_t(t.id)] = t.special;
    added_ids_[t.content] = t.id;
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool allow_special) const {
  if (!is_valid_utf8(text)) throw InputError("text to tokenize is not valid UTF-8");
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<AddedTokens::Segment> segments;
  added_.split(text, allow_special, segments);
  std::vector<std::string_view> pieces;
  for (const auto& seg : segments) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      continue;
    }
    pieces.clear();
    pre_.split(seg.text, pieces);
    for (const auto piece : pieces) bpe_.encode(piece, ids);
  }
  return ids;
}

const std::string& Tokenizer::id_to_token(int32_t id) const {
  if (id < 0 || id >= vocab_size()) throw InputError("token id " + std::to_string(id) + " is outside the vocabulary (size " + std::to_string(vocab_size()) + ")");
  return tokens_[size_t(id)];
}

bool Tokenizer::is_special(int32_t id) const { return id >= 0 && id < vocab_size() && special_[size_t(id)]; }

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string out;
  for (const int32_t id : ids) {
    const std::string& t = id_to_token(id);
    if (skip_special && special_[size_t(id)]) continue;
    out += t;
  }
  return out;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (const auto it = added_ids_.find(std::string(token)); it != added_ids_.end()) return it->second;
  return bpe_.token_to_id(token);
}

std::string StreamDecoder::push(int32_t id) {
  const std::string& t = tok_.id_to_token(id);
  if (!(skip_special_ && tok_.is_special(id))) pending_ += t;
  const size_t hold = incomplete_utf8_tail(pending_);
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StreamDecoder::flush() { return std::exchange(pending_, {}); }

}  // namespace trillion
