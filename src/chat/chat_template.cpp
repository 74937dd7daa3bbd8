#include "chat/chat_template.hpp"

#include <fstream>
#include <sstream>

#include "common/error.hpp"

namespace trillion {
namespace {

using Json = nlohmann::ordered_json;

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw SystemError("cannot open " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// bos_token and eos_token are a string or an AddedToken {"content": ...}.
std::string token_text(const Json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  return "";
}

}  // namespace

ChatTemplate load_chat_template(const std::filesystem::path& model_dir, const std::string& name) {
  ChatTemplate t;
  const std::filesystem::path config_path = model_dir / "tokenizer_config.json";
  const std::filesystem::path jinja_path = model_dir / "chat_template.jinja";
  const bool has_config = std::filesystem::exists(config_path);
  const bool has_jinja = std::filesystem::exists(jinja_path);
  if (!has_config && !has_jinja)
    throw SystemError("no tokenizer_config.json or chat_template.jinja in " + model_dir.string());
  Json config = Json::object();
  if (has_config) {
    try {
      config = Json::parse(read_file(config_path));
    } catch (const Json::parse_error& e) {
      throw FormatError(config_path.string() + ": " + e.what());
    }
    t.bos_token = token_text(config, "bos_token");
    t.eos_token = token_text(config, "eos_token");
  }
  if (has_jinja) {
    t.source = read_file(jinja_path);
    return t;
  }
  auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) throw FormatError(config_path.string() + ": no chat_template");
  if (it->is_string()) {
    t.source = it->get<std::string>();
    return t;
  }
  if (!it->is_array()) throw FormatError(config_path.string() + ": chat_template is neither a string nor a list");
  std::string names;
  for (const Json& entry : *it) {
    if (!entry.is_object() || !entry.contains("name") || !entry.contains("template"))
      throw FormatError(config_path.string() + ": chat_template list entries need \"name\" and \"template\"");
    if (entry["name"] == name) {
      t.source = entry["template"].get<std::string>();
      return t;
    }
    names += (names.empty() ? "" : ", ") + entry["name"].dump();
  }
  throw FormatError(config_path.string() + ": no chat_template named \"" + name + "\" (has " + names + ")");
}

std::string render_chat(const chat::Template& tmpl, const Json& messages, bool add_generation_prompt,
                        const Json& extra) {
  if (!messages.is_array()) throw InputError("messages must be a JSON array");
  if (!extra.is_object()) throw InputError("chat template variables must be a JSON object");
  Json vars = Json::object();
  vars["messages"] = messages;
  vars["tools"] = nullptr;
  vars["documents"] = nullptr;
  vars["add_generation_prompt"] = add_generation_prompt;
  for (const auto& [k, v] : extra.items()) vars[k] = v;
  return tmpl.render(vars);
}

std::string render_chat(const std::string& template_text, const Json& messages, bool add_generation_prompt,
                        const Json& extra) {
  return render_chat(chat::Template(template_text), messages, add_generation_prompt, extra);
}

Json special_tokens(const ChatTemplate& t) { return Json{{"bos_token", t.bos_token}, {"eos_token", t.eos_token}}; }

}  // namespace trillion
