// trillion tokenize --model DIR | --tokenizer FILE [--input F] [--output F] [--decode]
// JSONL {"text": "..."} -> {"ids": [...]} one line per line (special tokens
// in the text recognized, no BOS added); --decode: {"ids"} -> {"text"}.
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "app/commands.hpp"
#include "app/run_options.hpp"
#include "common/error.hpp"
#include "tokenizer/tokenizer.hpp"

namespace po = boost::program_options;

namespace trillion::app {

int run_tokenize(const Args& args) {
  std::string model_dir, tokenizer_file, input, output;
  bool decode = false;
  po::options_description desc("options");
  desc.add_options()
      ("model", po::value(&model_dir), "model directory (tokenizer.json or tiktoken.model)")
      ("tokenizer", po::value(&tokenizer_file), "a tokenizer.json or tiktoken.model file")
      ("input", po::value(&input), "JSONL input (default: standard input)")
      ("output", po::value(&output), "JSONL output (default: standard output)")
      ("decode", po::bool_switch(&decode), "read {\"ids\"} lines, write {\"text\"} lines");
  if (!parse_args(args, "usage: trillion tokenize --model DIR | --tokenizer FILE [--input F] [--output F] [--decode]", desc))
    return 0;
  if (model_dir.empty() == tokenizer_file.empty()) throw InputError("give exactly one of --model DIR or --tokenizer FILE");
  const Tokenizer tok = load_tokenizer(model_dir.empty() ? tokenizer_file : model_dir);

  std::ifstream in_file;
  if (!input.empty()) {
    in_file.open(input, std::ios::binary);
    if (!in_file) throw SystemError(input + ": cannot open");
  }
  std::istream& in = input.empty() ? std::cin : in_file;
  std::ofstream out_file;
  if (!output.empty()) {
    out_file.open(output, std::ios::binary);
    if (!out_file) throw SystemError(output + ": cannot create");
  }
  std::ostream& out = output.empty() ? std::cout : out_file;
  const std::string where = input.empty() ? "<stdin>" : input;

  std::string line;
  for (int64_t lineno = 1; std::getline(in, line); ++lineno) {
    const std::string at = where + ":" + std::to_string(lineno) + ": ";
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw InputError(at + "malformed JSON: " + e.what());
    }
    try {
      if (decode) {
        if (!j.is_object() || !j.contains("ids") || !j["ids"].is_array()) throw InputError("expected {\"ids\": [...]}");
        const auto ids = j["ids"].get<std::vector<int32_t>>();
        out << nlohmann::json{{"text", tok.decode(ids)}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
            << '\n';
      } else {
        if (!j.is_object() || !j.contains("text") || !j["text"].is_string()) throw InputError("expected {\"text\": \"...\"}");
        out << nlohmann::json{{"ids", tok.encode(j["text"].get<std::string>(), true)}}.dump() << '\n';
      }
    } catch (const nlohmann::json::exception& e) {
      throw InputError(at + e.what());
    } catch (const InputError& e) {
      throw InputError(at + e.what());
    }
  }
  out.flush();
  if (!out) throw SystemError((output.empty() ? std::string("<stdout>") : output) + ": write failed");
  return 0;
}

}  // namespace trillion::app
