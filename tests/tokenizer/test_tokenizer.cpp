#define BOOST_TEST_MODULE tokenizer
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "tokenizer/byte_level.hpp"
#include "tokenizer/tokenizer.hpp"

using namespace trillion;
using nlohmann::json;

namespace {

const std::string kFixtures = std::string(TRILLION_FIXTURES) + "/tokenizers";

struct Golden {
  std::string text;
  std::vector<int32_t> ids;
};

std::vector<Golden> read_golden(const std::string& name) {
  std::ifstream in(std::string(TRILLION_GOLDEN) + "/" + name);
  BOOST_REQUIRE(in);
  std::vector<Golden> out;
  for (std::string line; std::getline(in, line);) {
    const json j = json::parse(line);
    out.push_back({j.at("text").get<std::string>(), j.at("ids").get<std::vector<int32_t>>()});
  }
  BOOST_REQUIRE(!out.empty());
  return out;
}

const Tokenizer& deepseek() {
  static const Tokenizer t = load_tokenizer(kFixtures + "/deepseek-v3");
  return t;
}

// (const char*: GCC 14's -Wdangling-reference flags a reference returned
// from a call given a temporary std::string, though the cache owns it.)
const Tokenizer& tiktoken(const char* name) {
  static std::map<std::string, Tokenizer> cache;
  auto it = cache.find(name);
  if (it == cache.end()) {
    std::ifstream in(kFixtures + "/" + name + "/tiktoken.json");
    const json meta = json::parse(in);
    it = cache.emplace(name, load_tiktoken(kFixtures + "/" + name + "/tiktoken.model", meta.at("pat_str").get<std::string>(),
                                           meta.at("special_tokens").get<std::map<std::string, int32_t>>()))
             .first;
  }
  return it->second;
}

void check_golden(const Tokenizer& tok, const std::string& file) {
  const auto goldens = read_golden(file);
  for (const auto& g : goldens) {
    BOOST_TEST_CONTEXT(file << ": " << g.text) {
      const auto ids = tok.encode(g.text);
      BOOST_TEST(ids == g.ids, boost::test_tools::per_element());
      BOOST_TEST(tok.decode(ids) == g.text);
    }
  }
  BOOST_TEST_MESSAGE(file << ": " << goldens.size() << " golden strings");
}

// Streams ids one at a time: every piece is whole UTF-8, the pieces add up
// to the text.
void check_stream(const Tokenizer& tok, const std::string& text) {
  StreamDecoder dec(tok);
  std::string joined;
  for (const int32_t id : tok.encode(text)) {
    const std::string piece = dec.push(id);
    BOOST_TEST(is_valid_utf8(piece));
    joined += piece;
  }
  joined += dec.flush();
  BOOST_TEST(joined == text);
}

std::string write_temp(const std::string& name, const std::string& contents) {
  const auto dir = std::filesystem::temp_directory_path() / "trillion_test_tokenizer";
  std::filesystem::create_directories(dir);
  const auto path = (dir / name).string();
  std::ofstream(path) << contents;
  return path;
}

template <class E>
void check_throws_naming(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    BOOST_FAIL("expected an exception naming " << needle);
  } catch (const E& e) {
    BOOST_TEST(std::string(e.what()).find(needle) != std::string::npos, e.what());
  }
}

std::vector<std::string> split(const std::string& pattern, SplitBehavior b, const std::string& text, bool invert = false) {
  Pretokenizer pre;
  pre.add({std::make_shared<Regex>(pattern, "test"), b, invert});
  std::vector<std::string_view> pieces;
  pre.split(text, pieces);
  return {pieces.begin(), pieces.end()};
}

}  // namespace

BOOST_AUTO_TEST_CASE(golden_deepseek_v3) { check_golden(deepseek(), "deepseek-v3.jsonl"); }
BOOST_AUTO_TEST_CASE(golden_cl100k_base) { check_golden(tiktoken("cl100k_base"), "cl100k_base.jsonl"); }
BOOST_AUTO_TEST_CASE(golden_o200k_base) { check_golden(tiktoken("o200k_base"), "o200k_base.jsonl"); }

BOOST_AUTO_TEST_CASE(round_trip_and_streaming) {
  std::vector<std::string> texts;
  for (const auto& g : read_golden("deepseek-v3.jsonl")) texts.push_back(g.text);
  texts.push_back("🏳️‍🌈👨‍👩‍👧‍👦 \xF0\x9F\x98\x80 mixed 漢字 and ＡＢＣ " + std::string(300, 'x') + std::string(50, ' ') + "end");
  for (const auto* tok : {&deepseek(), &tiktoken("cl100k_base"), &tiktoken("o200k_base")}) {
    for (const auto& t : texts) {
      BOOST_TEST(tok->decode(tok->encode(t)) == t);
      check_stream(*tok, t);
    }
  }
}

BOOST_AUTO_TEST_CASE(stream_holds_back_partial_characters) {
  // A rare CJK character and emoji split into byte tokens: some tokens end mid-character.
  const Tokenizer& tok = deepseek();
  const std::string text = "𠜎𠜱😀🦄";
  const auto ids = tok.encode(text);
  bool saw_partial = false;
  for (const int32_t id : ids) saw_partial |= incomplete_utf8_tail(tok.id_to_token(id)) > 0 || !is_valid_utf8(tok.id_to_token(id));
  BOOST_TEST(saw_partial);
  StreamDecoder dec(tok);
  std::string joined;
  for (const int32_t id : ids) {
    const auto piece = dec.push(id);
    BOOST_TEST(is_valid_utf8(piece));
    joined += piece;
  }
  BOOST_TEST(dec.flush().empty());
  BOOST_TEST(joined == text);

  // A stream cut mid-character hands the incomplete bytes over at flush.
  StreamDecoder cut(tok);
  std::string head;
  for (size_t i = 0; i + 1 < ids.size(); ++i) head += cut.push(ids[i]);
  head += cut.flush();
  BOOST_TEST(head == tok.decode(std::span(ids).first(ids.size() - 1)));
}

BOOST_AUTO_TEST_CASE(special_tokens) {
  const Tokenizer& tok = deepseek();
  BOOST_TEST(tok.bos_id.value_or(-1) == 0);
  BOOST_TEST(tok.eos_id.value_or(-1) == 1);
  BOOST_TEST(tok.token_to_id("<｜end▁of▁sentence｜>").value_or(-1) == 1);
  BOOST_TEST(tok.id_to_token(1) == "<｜end▁of▁sentence｜>");
  BOOST_TEST(tok.is_special(0));
  BOOST_TEST(tok.vocab_size() == 128815);
  const std::string text = "a<｜begin▁of▁sentence｜>b";
  BOOST_TEST(tok.encode(text, true).size() == 3u);
  const auto plain = tok.encode(text, false);
  BOOST_TEST(std::count(plain.begin(), plain.end(), 0) == 0);
  BOOST_TEST(tok.decode(plain) == text);
  BOOST_TEST(tok.decode(tok.encode(text), true) == "ab");
  // Byte-level spelling is internal: " the" is the token spelled "Ġthe".
  BOOST_TEST(tok.token_to_id(" the").has_value());
  BOOST_TEST(!tok.token_to_id("Ġthe").has_value());

  const Tokenizer& cl = tiktoken("cl100k_base");
  BOOST_TEST(cl.encode("<|endoftext|>", true) == std::vector<int32_t>{100257}, boost::test_tools::per_element());
  BOOST_TEST(cl.encode("<|endoftext|>", false).size() > 1u);
}

BOOST_AUTO_TEST_CASE(split_behaviors) {
  // The examples of the Hugging Face tokenizers documentation.
  const std::string t = "the-final--countdown";
  using V = std::vector<std::string>;
  BOOST_TEST(split("-", SplitBehavior::removed, t) == (V{"the", "final", "countdown"}), boost::test_tools::per_element());
  BOOST_TEST(split("-", SplitBehavior::isolated, t) == (V{"the", "-", "final", "-", "-", "countdown"}), boost::test_tools::per_element());
  BOOST_TEST(split("-", SplitBehavior::merged_with_previous, t) == (V{"the-", "final-", "-", "countdown"}), boost::test_tools::per_element());
  BOOST_TEST(split("-", SplitBehavior::merged_with_next, t) == (V{"the", "-final", "-", "-countdown"}), boost::test_tools::per_element());
  BOOST_TEST(split("-", SplitBehavior::contiguous, t) == (V{"the", "-", "final", "--", "countdown"}), boost::test_tools::per_element());
  BOOST_TEST(split("-", SplitBehavior::removed, t, true) == (V{"-", "-", "-"}), boost::test_tools::per_element());
  BOOST_TEST(split(R"(\s+(?!\S)|\s+)", SplitBehavior::isolated, "a   b") == (V{"a", "  ", " ", "b"}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(kimi_pattern_compiles_and_splits_han) {
  Pretokenizer pre;
  pre.add({std::make_shared<Regex>(kKimiK2Pattern, "kimi"), SplitBehavior::isolated, false});
  std::vector<std::string_view> pieces;
  pre.split("你好World's 123456 ok\n\n", pieces);
  BOOST_TEST((std::vector<std::string>(pieces.begin(), pieces.end()) ==
              std::vector<std::string>{"你好", "World's", " ", "123", "456", " ok", "\n\n"}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(byte_level_map) {
  BOOST_TEST(byte_to_unicode(' ') == "Ġ");
  BOOST_TEST(byte_to_unicode('\n') == "Ċ");
  BOOST_TEST(byte_to_unicode('a') == "a");
  BOOST_TEST(unicode_to_bytes("Ġthe").value_or("?") == " the");
  for (int b = 0; b < 256; ++b) BOOST_TEST(unicode_to_bytes(byte_to_unicode(uint8_t(b))).value_or("") == std::string(1, char(b)));
  BOOST_TEST(incomplete_utf8_tail("a\xE4\xBD") == 2u);
  BOOST_TEST(incomplete_utf8_tail("a\xE4\xBD\xA0") == 0u);
  BOOST_TEST(incomplete_utf8_tail("\xF0\x9F\x98") == 3u);
}

BOOST_AUTO_TEST_CASE(load_errors_name_the_file) {
  check_throws_naming<SystemError>([] { load_tokenizer("/nonexistent/model"); }, "/nonexistent/model");
  const auto bad = write_temp("bad.json", "{\"model\": [");
  check_throws_naming<FormatError>([&] { load_hf_tokenizer(bad); }, bad);
  const auto unknown = write_temp(
      "unknown.json", R"({"normalizer": null, "pre_tokenizer": {"type": "Whitespace"}, "model": {"type": "BPE", "vocab": {}, "merges": []}})");
  check_throws_naming<FormatError>([&] { load_hf_tokenizer(unknown); }, "Whitespace");
  check_throws_naming<FormatError>([&] { load_hf_tokenizer(unknown); }, unknown);
  const auto badregex = write_temp(
      "badregex.json", R"({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "(["}, "behavior": "Isolated", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]}, "model": {"type": "BPE", "vocab": {}, "merges": []}})");
  check_throws_naming<FormatError>([&] { load_hf_tokenizer(badregex); }, badregex);
  const auto badtik = write_temp("bad.tiktoken", "IQ== 0\nnot base64!! x\n");
  check_throws_naming<FormatError>([&] { load_tiktoken(badtik, "\\s+", {}); }, badtik + ":2");
  BOOST_CHECK_THROW(deepseek().decode(std::vector<int32_t>{999999}), InputError);
  BOOST_CHECK_THROW(deepseek().encode("bad \xFF utf8"), InputError);
}

BOOST_AUTO_TEST_CASE(kimi_style_model_directory) {
  // A tiktoken.model (cl100k ranks here) with tokenizer_config.json beside it, as Kimi K2 ships.
  const auto dir = std::filesystem::temp_directory_path() / "trillion_test_tokenizer" / "kimi";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(kFixtures + "/cl100k_base/tiktoken.model", dir / "tiktoken.model",
                             std::filesystem::copy_options::overwrite_existing);
  std::ofstream(dir / "tokenizer_config.json") << R"({"added_tokens_decoder": {
      "100257": {"content": "[BOS]", "special": true}, "100258": {"content": "[EOS]", "special": true}},
      "bos_token": "[BOS]", "eos_token": {"content": "[EOS]"}})";
  const Tokenizer tok = load_tokenizer(dir.string());
  BOOST_TEST(tok.bos_id.value_or(-1) == 100257);
  BOOST_TEST(tok.eos_id.value_or(-1) == 100258);
  BOOST_TEST(tok.vocab_size() == 100256 + 256);  // the reserved block after the base tokens
  BOOST_TEST(tok.token_to_id("<|reserved_token_100300|>").value_or(-1) == 100300);
  const auto ids = tok.encode("你好世界 Hello[EOS]");
  BOOST_TEST(ids.back() == 100258);
  BOOST_TEST(tok.decode(ids) == "你好世界 Hello[EOS]");
  // The file itself loads the same way.
  BOOST_TEST(load_tokenizer((dir / "tiktoken.model").string()).encode("[BOS]x").front() == 100257);
}
