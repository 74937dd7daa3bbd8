// Chat templates of the model families trillion runs: turn OpenAI-style
// `messages` into the prompt text, exactly as Hugging Face's
// apply_chat_template(tokenize=False) renders them with Jinja2.
#pragma once
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/template.hpp"

namespace trillion {

// What a model directory says about its prompt format.
struct ChatTemplate {
  std::string source;     // the Jinja2 text
  std::string bos_token;  // tokenizer_config.json's bos_token ("" when absent)
  std::string eos_token;  // tokenizer_config.json's eos_token ("" when absent)
};

// Reads MODEL_DIR/chat_template.jinja if present (it wins, as in Hugging
// Face), else tokenizer_config.json's chat_template: a string, or a list of
// {"name", "template"} from which `name` is taken. Throws SystemError when no
// file can be read, FormatError when neither holds a template (or not `name`).
ChatTemplate load_chat_template(const std::filesystem::path& model_dir, const std::string& name = "default");

// Renders `messages` (a JSON array of {"role", "content", ...}) with the
// template. The template sees `messages`, `add_generation_prompt`, `tools`
// and `documents` (none unless given), and every key of `extra` (an object:
// bos_token, eos_token, tools, ...), as Hugging Face passes them. Parse
// requests with nlohmann::ordered_json so tool schemas keep their key order
// in |tojson. Throws chat::TemplateError for templates trillion does not
// support and InputError for messages the template rejects.
std::string render_chat(const chat::Template& tmpl, const nlohmann::ordered_json& messages,
                        bool add_generation_prompt, const nlohmann::ordered_json& extra = nlohmann::ordered_json::object());
std::string render_chat(const std::string& template_text, const nlohmann::ordered_json& messages,
                        bool add_generation_prompt, const nlohmann::ordered_json& extra = nlohmann::ordered_json::object());

// extra for a loaded template: {"bos_token", "eos_token"}.
nlohmann::ordered_json special_tokens(const ChatTemplate& t);

}  // namespace trillion
