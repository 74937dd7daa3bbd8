#include "text/model_text.hpp"

#include <filesystem>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "chat/chat_template.hpp"
#include "tokenizer/tokenizer.hpp"

namespace trillion {

namespace {

struct Loaded {
  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<ChatTemplate> chat;
  std::unique_ptr<chat::Template> parsed;
  bool add_bos = false;
};

bool add_bos_token(const std::filesystem::path& dir) {
  std::ifstream in(dir / "tokenizer_config.json");
  if (!in) return false;
  try {
    const auto j = nlohmann::json::parse(in);
    auto it = j.find("add_bos_token");
    return it != j.end() && it->is_boolean() && it->get<bool>();
  } catch (const nlohmann::json::exception&) {
    return false;  // the tokenizer loader reports a malformed file
  }
}

// The tokenizer's StreamDecoder, dropping special tokens as `decode` does, so
// the pieces of a sequence concatenate to its decoded text.
class TokenizerStream : public TokenTextStream {
 public:
  explicit TokenizerStream(const Tokenizer& tok) : d_(tok, /*skip_special=*/true) {}
  std::string push(int32_t id) override { return d_.push(id); }
  std::string flush() override { return d_.flush(); }

 private:
  StreamDecoder d_;
};

}  // namespace

TextSupport load_text_support(const std::string& model_dir) {
  namespace fs = std::filesystem;
  const fs::path dir(model_dir);
  auto loaded = std::make_shared<Loaded>();
  TextSupport t;
  if (fs::exists(dir / "tokenizer.json") || fs::exists(dir / "tiktoken.model")) {
    loaded->tok = std::make_unique<Tokenizer>(load_tokenizer(model_dir));
    loaded->add_bos = add_bos_token(dir) && loaded->tok->bos_id.has_value();
    t.note = "tokenizer " + loaded->tok->source();
    t.vocab_size = loaded->tok->vocab_size();
  }
  const bool has_template =
      fs::exists(dir / "chat_template.jinja") ||
      (fs::exists(dir / "tokenizer_config.json") && [&] {
        std::ifstream in(dir / "tokenizer_config.json");
        try {
          return nlohmann::json::parse(in).contains("chat_template");
        } catch (const nlohmann::json::exception&) {
          return false;
        }
      }());
  if (loaded->tok && has_template) {
    loaded->chat = std::make_unique<ChatTemplate>(load_chat_template(dir));
    loaded->parsed = std::make_unique<chat::Template>(loaded->chat->source);
    t.note += ", chat template";
  }
  // Each callback holds the loaded tokenizer and template: they live as long
  // as any copy of the codec.
  const std::shared_ptr<const Loaded> l = loaded;
  if (l->tok) {
    t.codec.encode = [l](const std::string& text) { return l->tok->encode(text, /*allow_special=*/true); };
    if (l->add_bos) t.codec.text_bos = *l->tok->bos_id;
    t.codec.decode = [l](const std::vector<int32_t>& ids) { return l->tok->decode(ids, /*skip_special=*/true); };
    t.codec.stream = [l]() -> std::unique_ptr<TokenTextStream> { return std::make_unique<TokenizerStream>(*l->tok); };
  }
  if (l->chat) {
    // The rendered text already holds BOS and the role markers: it is encoded as is.
    t.codec.render_chat = [l](const nlohmann::json& messages) {
      const auto msgs = nlohmann::ordered_json::parse(messages.dump());
      return render_chat(*l->parsed, msgs, /*add_generation_prompt=*/true, special_tokens(*l->chat));
    };
  }
  return t;
}

}  // namespace trillion
