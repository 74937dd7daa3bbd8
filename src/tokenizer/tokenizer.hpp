// Text <-> token ids for the model families trillion runs: Hugging Face
// tokenizer.json byte-level BPE (DeepSeek-V3) and tiktoken BPE files (Kimi K2).
// Both become the same pipeline:
//   added/special tokens -> regex pre-tokenizer -> byte-pair merges per piece.
// Tokens are raw bytes throughout (a token may end mid-UTF-8 character).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/added_tokens.hpp"
#include "tokenizer/bpe.hpp"
#include "tokenizer/pretokenizer.hpp"

namespace trillion {

class Tokenizer {
 public:
  Tokenizer(std::string source, Pretokenizer pre, BpeModel bpe, AddedTokens added);

  // UTF-8 text -> ids. allow_special: special tokens written in the text
  // become their ids (otherwise they are tokenized as plain text). Never adds
  // BOS. Throws InputError for text that is not valid UTF-8.
  std::vector<int32_t> encode(std::string_view text, bool allow_special = true) const;

  // ids -> raw bytes (possibly invalid UTF-8 when a sequence is cut mid-character).
  // Throws InputError for an id outside the vocabulary.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // A token's raw bytes (" the", not "Ġthe"), or an added token's content.
  std::optional<int32_t> token_to_id(std::string_view token) const;
  const std::string& id_to_token(int32_t id) const;  // throws InputError when unknown
  bool is_special(int32_t id) const;

  int32_t vocab_size() const { return int32_t(tokens_.size()); }  // largest id + 1
  std::optional<int32_t> bos_id, eos_id;  // from tokenizer_config.json when present
  const std::string& source() const { return source_; }  // the file it was loaded from

 private:
  std::string source_;
  Pretokenizer pre_;
  BpeModel bpe_;
  AddedTokens added_;
  std::vector<std::string> tokens_;  // [id] raw bytes, added tokens included
  std::vector<bool> special_;        // [id]
  std::unordered_map<std::string, int32_t> added_ids_;
};

// Decodes a stream of ids a token at a time, holding back the bytes of a
// UTF-8 character until its last byte arrives, so each piece is whole text.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool skip_special = false) : tok_(tok), skip_special_(skip_special) {}
  std::string push(int32_t id);  // text completed by this token (may be empty)
  std::string flush();           // whatever is held back (an incomplete character)

 private:
  const Tokenizer& tok_;
  bool skip_special_;
  std::string pending_;
};

// tokenizer.json (+ tokenizer_config.json beside it for bos/eos when present).
// Throws SystemError (cannot read) or FormatError (malformed, unsupported),
// naming the file.
Tokenizer load_hf_tokenizer(const std::string& tokenizer_json);

// A tiktoken BPE file ("base64-token rank" per line) with its split pattern
// and special tokens (content -> id).
Tokenizer load_tiktoken(const std::string& tiktoken_file, const std::string& pattern,
                        const std::map<std::string, int32_t>& special_tokens);

// Sets tok.bos_id / eos_id from a tokenizer_config.json's bos_token and
// eos_token (a string or {"content": ...}); no-op when the file is absent.
void apply_tokenizer_config(Tokenizer& tok, const std::string& config_path);

// Kimi K2's split pattern (tokenization_kimi.py), in PCRE2 syntax.
extern const char* const kKimiK2Pattern;

// A model directory: tokenizer.json when present, else tiktoken.model with
// Kimi K2's pattern and special tokens: the 256 ids after the base vocabulary,
// named by tokenizer_config.json's added_tokens_decoder, the rest
// <|reserved_token_ID|> (as tokenization_kimi.py does).
// A path to a file loads that file (tokenizer.json or *.model / tiktoken).
Tokenizer load_tokenizer(const std::string& path);

}  // namespace trillion
