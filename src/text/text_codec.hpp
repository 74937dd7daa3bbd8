// The model's text as the engine's layers see it, in one place: prompt text
// and chat messages to token ids, and generated ids back to text, whole or a
// token at a time. Callbacks only, so requests/ (prompts, result texts) and
// scheduler/ (stop strings) use the tokenizer and the chat template without
// depending on them; model_text.hpp fills one from a model directory, and
// tests fill one by hand.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace trillion {

// A sequence's generated ids as text, one token at a time; pieces are whole
// UTF-8 characters (bytes of an unfinished character are held back), and
// the pieces of a sequence concatenate to what TextCodec::decode gives.
class TokenTextStream {
 public:
  virtual ~TokenTextStream() = default;
  virtual std::string push(int32_t id) = 0;  // the text this token completes (may be empty)
  virtual std::string flush() = 0;           // bytes still held back (an unfinished character)
};

struct TextCodec {
  using Encode = std::function<std::vector<int32_t>(const std::string& text)>;
  using RenderChat = std::function<std::string(const nlohmann::json& messages)>;
  using Decode = std::function<std::string(const std::vector<int32_t>& ids)>;
  using StreamFactory = std::function<std::unique_ptr<TokenTextStream>()>;

  Encode encode;           // special tokens recognized, no BOS; empty without a tokenizer
  RenderChat render_chat;  // with the generation prompt; empty without a chat template
  // Prepended to plain text prompts (tokenizer_config.json add_bos_token);
  // a rendered chat carries its own BOS.
  std::optional<int32_t> text_bos;
  Decode decode;           // ids -> text, special tokens dropped; empty without a tokenizer
  StreamFactory stream;    // the same text a token at a time (stop strings); empty without a tokenizer
};

}  // namespace trillion
