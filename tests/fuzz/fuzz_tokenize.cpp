// Text through two small fixed tokenizers, one of each kind (tests/fuzz/data:
// DeepSeek-V3's tokenizer.json trimmed to 1761 tokens, cl100k's first 2000
// tiktoken ranks loaded as Kimi K2's tokenizer). The first input byte picks
// the tokenizer and the flags; the rest is the text, or token ids to decode.
// Byte-level BPE is lossless, so decode(encode(text)) must give the text
// back, and decoding a token at a time (StreamDecoder) the same bytes.
#include <cstring>

#include "fuzz_util.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

using trillion::Tokenizer;

const Tokenizer& tokenizer(bool tiktoken) {
  static const Tokenizer hf = trillion::load_hf_tokenizer(TRILLION_FUZZ_DATA "/tokenizer.json");
  static const Tokenizer tt = trillion::load_tokenizer(TRILLION_FUZZ_DATA "/tiktoken.model");
  return tiktoken ? tt : hf;
}

std::string stream_decode(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip_special) {
  trillion::StreamDecoder dec(tok, skip_special);
  std::string out;
  for (int32_t id : ids) out += dec.push(id);
  return out + dec.flush();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trillion;
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const Tokenizer& tok = tokenizer(mode & 1);
  const bool allow_special = mode & 2, skip_special = mode & 4;
  const std::string_view rest = fuzz::as_text(data + 1, size - 1);
  if (mode & 8) {  // the bytes as token ids: in the vocabulary or an InputError
    std::vector<int32_t> ids(rest.size() / 4);
    if (!ids.empty()) std::memcpy(ids.data(), rest.data(), ids.size() * 4);
    for (int32_t& id : ids) id %= tok.vocab_size() + 8;  // mostly valid, a few just past the end
    fuzz::expect_clean([&] {
      const std::string text = tok.decode(ids, skip_special);
      if (stream_decode(tok, ids, skip_special) != text) __builtin_trap();
    });
    return 0;
  }
  std::vector<int32_t> ids;
  try {
    ids = tok.encode(rest, allow_special);
  } catch (const InputError&) {
    return 0;  // not UTF-8: the one documented refusal
  }
  for (int32_t id : ids)
    if (id < 0 || id >= tok.vocab_size()) __builtin_trap();
  if (tok.decode(ids) != rest) __builtin_trap();
  if (stream_decode(tok, ids, false) != rest) __builtin_trap();
  (void)tok.decode(ids, skip_special);
  return 0;
}
