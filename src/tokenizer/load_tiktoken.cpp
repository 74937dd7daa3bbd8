// tiktoken BPE files -> Tokenizer, and load_tokenizer(), which picks the
// format of a model directory.
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "tokenizer/tokenizer.hpp"

namespace trillion {

// tokenization_kimi.py's pattern. Python `regex`'s class intersection
// [A&&[^\p{Han}]] is written here as (?:(?!\p{Han})[A]).
const char* const kKimiK2Pattern =
    R"([\p{Han}]+)"
    R"(|[^\r\n\p{L}\p{N}]?(?:(?!\p{Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])*(?:(?!\p{Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?(?:(?!\p{Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])+(?:(?!\p{Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3})"
    R"(| ?[^\s\p{L}\p{N}]+[\r\n]*)"
    R"(|\s*[\r\n]+)"
    R"(|\s+(?!\S))"
    R"(|\s+)";

namespace {

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

bool base64_decode(std::string_view in, std::string& out) {
  out.clear();
  uint32_t acc = 0;
  int bits = 0;
  for (const char c : in) {
    if (c == '=') break;
    const int v = base64_value(c);
    if (v < 0) return false;
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += char((acc >> bits) & 0xFF);
    }
  }
  return true;
}

}  // namespace

Tokenizer load_tiktoken(const std::string& file, const std::string& pattern,
                        const std::map<std::string, int32_t>& special_tokens) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw SystemError(file + ": cannot open");
  std::vector<std::string> tokens;
  std::string line, bytes;
  for (int64_t lineno = 1; std::getline(in, line); ++lineno) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    int64_t rank = -1;
    try {
      if (space != std::string::npos) rank = std::stoll(line.substr(space + 1));
    } catch (const std::exception&) {
      rank = -1;
    }
    if (rank < 0 || rank > (1 << 24) || !base64_decode(std::string_view(line).substr(0, space), bytes) || bytes.empty())
      throw FormatError(file + ":" + std::to_string(lineno) + ": expected 'base64-token rank'");
    if (size_t(rank) >= tokens.size()) tokens.resize(size_t(rank) + 1);
    tokens[size_t(rank)] = bytes;
  }
  Pretokenizer pre;
  pre.add({std::make_shared<Regex>(pattern, file), SplitBehavior::isolated, false});
  AddedTokens added;
  for (const auto& [content, id] : special_tokens) added.add({content, id, true, false, false, false});
  return Tokenizer(file, std::move(pre), BpeModel::from_ranks(std::move(tokens), file), std::move(added));
}

namespace {

constexpr int32_t kKimiReservedSpecialTokens = 256;  // tokenization_kimi.py

// Kimi K2: tiktoken.model with its pattern; special tokens and bos/eos from
// tokenizer_config.json beside it (added_tokens_decoder: {"id": {"content"}}).
Tokenizer load_kimi_tiktoken(const std::filesystem::path& model_file) {
  std::map<std::string, int32_t> specials;
  const auto cfg_path = model_file.parent_path() / "tokenizer_config.json";
  if (std::filesystem::exists(cfg_path)) {
    std::ifstream in(cfg_path);
    try {
      const auto cfg = nlohmann::json::parse(in);
      if (cfg.contains("added_tokens_decoder"))
        for (const auto& [id, t] : cfg["added_tokens_decoder"].items())
          specials[t.at("content").get<std::string>()] = int32_t(std::stol(id));
    } catch (const std::exception& e) {
      throw FormatError(cfg_path.string() + ": malformed: " + e.what());
    }
  }
  // The reserved block follows the base tokens: one line each in the file.
  int64_t base = 0;
  {
    std::ifstream in(model_file, std::ios::binary);
    if (!in) throw SystemError(model_file.string() + ": cannot open");
    for (std::string line; std::getline(in, line);) base += !line.empty() && line != "\r";
  }
  std::map<int32_t, std::string> named;
  for (const auto& [content, id] : specials) named[id] = content;
  for (int32_t id = int32_t(base); id < int32_t(base) + kKimiReservedSpecialTokens; ++id)
    if (!named.count(id)) specials["<|reserved_token_" + std::to_string(id) + "|>"] = id;
  Tokenizer tok = load_tiktoken(model_file.string(), kKimiK2Pattern, specials);
  apply_tokenizer_config(tok, cfg_path.string());
  return tok;
}

}  // namespace

Tokenizer load_tokenizer(const std::string& path) {
  namespace fs = std::filesystem;
  if (fs::is_directory(path)) {
    const fs::path dir(path);
    if (fs::exists(dir / "tokenizer.json")) return load_hf_tokenizer((dir / "tokenizer.json").string());
    if (fs::exists(dir / "tiktoken.model")) return load_kimi_tiktoken(dir / "tiktoken.model");
    throw SystemError(path + ": no tokenizer.json or tiktoken.model in the model directory");
  }
  if (!fs::exists(path)) throw SystemError(path + ": no such file or directory");
  if (fs::path(path).extension() == ".json") return load_hf_tokenizer(path);
  return load_kimi_tiktoken(fs::path(path));
}

}  // namespace trillion
