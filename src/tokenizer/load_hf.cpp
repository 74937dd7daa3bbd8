// tokenizer.json (Hugging Face tokenizers) -> Tokenizer. Supported: an empty
// normalizer, Split / ByteLevel pre-tokenizers (alone or in a Sequence), a
// byte-level BPE model, a ByteLevel decoder. Anything else is a FormatError
// naming the file and the component, never a silent mis-tokenization.
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "tokenizer/byte_level.hpp"
#include "tokenizer/tokenizer.hpp"

namespace trillion {

namespace {

using nlohmann::json;

// GPT-2's pre-tokenizer regex (ByteLevel with use_regex = true).
const char* const kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw SystemError(path + ": cannot open");
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw FormatError(path + ": malformed JSON: " + e.what());
  }
}

std::string type_of(const json& j) { return j.is_object() ? j.value("type", std::string("?")) : "?"; }

void check_normalizer(const json& n, const std::string& file) {
  if (n.is_null()) return;
  if (type_of(n) == "Sequence") {
    for (const auto& sub : n.at("normalizers")) check_normalizer(sub, file);
    return;
  }
  throw FormatError(file + ": unsupported normalizer type '" + type_of(n) + "'");
}

// Adds the steps of one pre-tokenizer; returns whether it was ByteLevel.
bool add_pretokenizer(const json& p, Pretokenizer& pre, const std::string& file) {
  const std::string type = type_of(p);
  if (type == "Sequence") {
    bool byte_level = false;
    for (const auto& sub : p.at("pretokenizers")) byte_level |= add_pretokenizer(sub, pre, file);
    return byte_level;
  }
  if (type == "Split") {
    const json& pat = p.at("pattern");
    std::string regex;
    if (pat.contains("Regex")) {
      regex = pat.at("Regex").get<std::string>();
    } else {  // a literal string: escape it
      for (const char c : pat.at("String").get<std::string>()) {
        if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) regex += '\\';
        regex += c;
      }
    }
    pre.add({std::make_shared<Regex>(regex, file), parse_split_behavior(p.at("behavior").get<std::string>(), file),
             p.value("invert", false)});
    return false;
  }
  if (type == "ByteLevel") {
    if (p.value("add_prefix_space", false))
      throw FormatError(file + ": ByteLevel pre-tokenizer with add_prefix_space is not supported");
    if (p.value("use_regex", true)) pre.add({std::make_shared<Regex>(kGpt2Pattern, file), SplitBehavior::isolated, false});
    return true;
  }
  throw FormatError(file + ": unsupported pre-tokenizer type '" + type + "'");
}

// The token of tokenizer_config.json's bos_token / eos_token: a string or
// an AddedToken object.
std::optional<std::string> config_token(const json& cfg, const char* key) {
  if (!cfg.contains(key) || cfg[key].is_null()) return std::nullopt;
  if (cfg[key].is_string()) return cfg[key].get<std::string>();
  if (cfg[key].is_object() && cfg[key].contains("content")) return cfg[key]["content"].get<std::string>();
  return std::nullopt;
}

}  // namespace

void apply_tokenizer_config(Tokenizer& tok, const std::string& config_path) {
  if (!std::filesystem::exists(config_path)) return;
  const json cfg = read_json(config_path);
  if (auto bos = config_token(cfg, "bos_token")) tok.bos_id = tok.token_to_id(*bos);
  if (auto eos = config_token(cfg, "eos_token")) tok.eos_id = tok.token_to_id(*eos);
}

Tokenizer load_hf_tokenizer(const std::string& file) {
  const json j = read_json(file);
  try {
    check_normalizer(j.value("normalizer", json()), file);
    Pretokenizer pre;
    const bool byte_level = add_pretokenizer(j.value("pre_tokenizer", json()), pre, file);
    if (!byte_level) throw FormatError(file + ": only byte-level BPE is supported (no ByteLevel pre-tokenizer)");
    if (const json& d = j.value("decoder", json()); !d.is_null() && type_of(d) != "ByteLevel")
      throw FormatError(file + ": unsupported decoder type '" + type_of(d) + "'");

    const json& model = j.at("model");
    if (type_of(model) != "BPE") throw FormatError(file + ": unsupported model type '" + type_of(model) + "'");
    if (model.value("byte_fallback", false) || !model.value("continuing_subword_prefix", json()).is_null() ||
        !model.value("end_of_word_suffix", json()).is_null())
      throw FormatError(file + ": BPE options byte_fallback / continuing_subword_prefix / end_of_word_suffix are not supported");

    // Vocabulary spelled in GPT-2 byte form -> raw bytes. An entry that is
    // not byte-spelled (a special token in the vocab) keeps its UTF-8 text.
    auto to_bytes = [](const std::string& s) { return unicode_to_bytes(s).value_or(s); };
    std::vector<std::string> tokens;
    for (const auto& [text, id_json] : model.at("vocab").items()) {
      // An integer first: get<int64_t> of 1e300 is undefined behaviour (found by fuzzing, UBSan).
      const int64_t id = id_json.is_number_integer() ? id_json.get<int64_t>() : -1;
      if (id < 0 || id > (1 << 24)) throw FormatError(file + ": token id out of range for '" + text + "'");
      if (size_t(id) >= tokens.size()) tokens.resize(size_t(id) + 1);
      tokens[size_t(id)] = to_bytes(text);
    }
    std::vector<std::pair<std::string, std::string>> merges;
    merges.reserve(model.at("merges").size());
    for (const auto& m : model.at("merges")) {
      if (m.is_array()) {
        merges.emplace_back(to_bytes(m.at(0).get<std::string>()), to_bytes(m.at(1).get<std::string>()));
      } else {
        const std::string s = m.get<std::string>();
        const size_t space = s.find(' ', 1);
        if (space == std::string::npos) throw FormatError(file + ": malformed merge '" + s + "'");
        merges.emplace_back(to_bytes(s.substr(0, space)), to_bytes(s.substr(space + 1)));
      }
    }
    BpeModel bpe = BpeModel::from_merges(std::move(tokens), merges, model.value("ignore_merges", false), file);

    AddedTokens added;
    for (const auto& a : j.value("added_tokens", json::array())) {
      // Bounded like the vocabulary's ids: the tokenizer allocates a slot per
      // id up to the largest (found by fuzzing: id 2e9 asked for 64 GB, 1e30
      // was undefined behaviour in get<int32_t>).
      const json& id = a.at("id");
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > (1 << 24))
        throw FormatError(file + ": added token id " + id.dump() + " out of range");
      added.add({a.at("content").get<std::string>(), int32_t(id.get<int64_t>()), a.value("special", false),
                 a.value("lstrip", false), a.value("rstrip", false), a.value("single_word", false)});
    }

    Tokenizer tok(file, std::move(pre), std::move(bpe), std::move(added));
    apply_tokenizer_config(tok, (std::filesystem::path(file).parent_path() / "tokenizer_config.json").string());
    return tok;
  } catch (const json::exception& e) {
    throw FormatError(file + ": unexpected structure: " + e.what());
  }
}

}  // namespace trillion
