// Chat templates against the real Jinja2: golden renderings made by
// tests/chat/golden/make_goldens.py, compared byte for byte.
#define BOOST_TEST_MODULE chat_template
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "chat/chat_template.hpp"
#include "common/error.hpp"

using namespace trillion;
using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;

namespace {

const fs::path kGolden = TRILLION_CHAT_GOLDEN;
const fs::path kFixtures = fs::path(TRILLION_FIXTURES) / "chat";

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  BOOST_REQUIRE_MESSAGE(in, "cannot open " << p);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

// Renders every conversation of cases.json with one family's template.
void check_family(const std::string& family, const std::string& source_override = "") {
  ChatTemplate loaded = load_chat_template(kFixtures / family);
  const chat::Template tmpl(source_override.empty() ? loaded.source : source_override);
  const Json cases = Json::parse(read(kGolden / "cases.json"));
  BOOST_REQUIRE(!cases.empty());
  int compared = 0;
  for (const Json& c : cases) {
    const std::string name = c["name"].get<std::string>();
    Json extra = special_tokens(loaded);
    if (c.contains("tools")) extra["tools"] = c["tools"];
    const bool agp = c["add_generation_prompt"].get<bool>();
    const fs::path txt = kGolden / family / (name + ".txt");
    if (fs::exists(txt)) {
      std::string got;
      BOOST_CHECK_NO_THROW(got = render_chat(tmpl, c["messages"], agp, extra));
      BOOST_CHECK_MESSAGE(got == read(txt), family << "/" << name << ": got\n" << got << "\nwant\n" << read(txt));
      ++compared;
    } else {
      BOOST_REQUIRE_MESSAGE(fs::exists(kGolden / family / (name + ".error")), "no golden for " << family << "/" << name);
      BOOST_CHECK_THROW(render_chat(tmpl, c["messages"], agp, extra), InputError);
    }
  }
  BOOST_CHECK_GT(compared, 10);
}

std::string error_of(const std::string& source, const Json& vars = Json::object()) {
  try {
    chat::Template(source).render(vars);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

BOOST_AUTO_TEST_CASE(deepseek_v3_goldens) { check_family("deepseek-v3"); }

BOOST_AUTO_TEST_CASE(kimi_k2_goldens) { check_family("kimi-k2"); }

BOOST_AUTO_TEST_CASE(kimi_k2_thinking_goldens) { check_family("kimi-k2-thinking"); }

BOOST_AUTO_TEST_CASE(lf_template_renders_like_crlf) {
  // The Kimi K2 template file has \r\n line ends; Jinja2 normalizes them,
  // so the same text with \n renders the same.
  std::string source = load_chat_template(kFixtures / "kimi-k2").source;
  BOOST_REQUIRE(source.find("\r\n") != std::string::npos);
  std::string lf;
  for (char c : source)
    if (c != '\r') lf += c;
  check_family("kimi-k2", lf);
}

BOOST_AUTO_TEST_CASE(snippets_match_jinja2) {
  const Json doc = Json::parse(read(kGolden / "snippets.json"));
  for (const Json& s : doc["snippets"]) {
    const std::string source = s["template"].get<std::string>();
    if (s.contains("output")) {
      std::string got;
      BOOST_CHECK_NO_THROW(got = chat::Template(source).render(doc["variables"]));
      BOOST_CHECK_MESSAGE(got == s["output"].get<std::string>(),
                          source << "\ngot:  " << Json(got).dump() << "\nwant: " << s["output"].dump());
    } else {
      BOOST_CHECK_THROW(chat::Template(source).render(doc["variables"]), InputError);
    }
  }
}

BOOST_AUTO_TEST_CASE(raise_exception_is_an_input_error_with_message) {
  BOOST_CHECK_EQUAL(error_of("ab\n  {{ raise_exception('Conversation roles must alternate') }}"),
                    "chat template line 2, column 6 raised: Conversation roles must alternate");
}

BOOST_AUTO_TEST_CASE(unsupported_constructs_name_their_position) {
  BOOST_CHECK_EQUAL(error_of("x\n{% include 'other.jinja' %}"),
                    "chat template line 2, column 4: unsupported tag 'include' (trillion supports if, for, set, macro, break, continue)");
  BOOST_CHECK_EQUAL(error_of("{{ x | wordwrap }}"), "chat template line 1, column 6: unsupported filter 'wordwrap'");
  BOOST_CHECK_EQUAL(error_of("{{ x is divisibleby(3) }}"), "chat template line 1, column 6: unsupported test 'divisibleby'");
  BOOST_CHECK_EQUAL(error_of("{{ ['\u00e9'] }}"),
                    "chat template line 1, column 4: printing a list holding a string with control or non-ASCII "
                    "characters needs Python's repr of it; use |tojson");
  BOOST_CHECK_EQUAL(error_of("{{ (1, 2) }}"), "chat template line 1, column 6: unsupported: tuples");
  BOOST_CHECK_EQUAL(error_of("{% break %}"), "chat template line 1, column 4: 'break' outside a for loop");
  BOOST_CHECK_EQUAL(error_of("{% for a, b in xs %}{% endfor %}"),
                    "chat template line 1, column 9: unsupported: unpacking several loop variables");
  BOOST_CHECK_EQUAL(error_of("{% if x %}never closed"),
                    "chat template line 1, column 23: template ended inside a block; expected 'elif'");
  BOOST_CHECK_EQUAL(error_of("{{ 'open"), "chat template line 1, column 4: string literal is never closed");
  BOOST_CHECK_THROW(chat::Template("{% if x %}"), chat::TemplateError);
}

BOOST_AUTO_TEST_CASE(messages_the_template_cannot_render_are_input_errors) {
  const std::string tmpl = load_chat_template(kFixtures / "deepseek-v3").source;
  BOOST_CHECK_THROW(render_chat(tmpl, Json::parse(R"([{"role": "user"}])"), true), InputError);
  BOOST_CHECK_THROW(render_chat(tmpl, Json::parse(R"({"role": "user"})"), true), InputError);
}

BOOST_AUTO_TEST_CASE(load_reads_tokenizer_config_and_jinja_files) {
  ChatTemplate ds = load_chat_template(kFixtures / "deepseek-v3");
  BOOST_CHECK_EQUAL(ds.bos_token, "<｜begin▁of▁sentence｜>");
  BOOST_CHECK_EQUAL(ds.eos_token, "<｜end▁of▁sentence｜>");
  BOOST_CHECK(ds.source.find("<｜Assistant｜>") != std::string::npos);

  const fs::path dir = fs::temp_directory_path() / "trillion_chat_load_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  write(dir / "tokenizer_config.json",
        R"({"bos_token": "[BOS]", "chat_template": [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}]})");
  BOOST_CHECK_EQUAL(load_chat_template(dir).source, "D");
  BOOST_CHECK_EQUAL(load_chat_template(dir).bos_token, "[BOS]");
  BOOST_CHECK_EQUAL(load_chat_template(dir, "tool_use").source, "T");
  BOOST_CHECK_THROW(load_chat_template(dir, "rag"), FormatError);
  write(dir / "chat_template.jinja", "J");
  BOOST_CHECK_EQUAL(load_chat_template(dir).source, "J");
  fs::remove_all(dir);
  BOOST_CHECK_THROW(load_chat_template(dir), SystemError);
}

BOOST_AUTO_TEST_CASE(truncated_templates_fail_cleanly) {
  // Every prefix of the real templates either renders or throws a trillion
  // Error naming a position; nothing else escapes, nothing crashes.
  const Json messages = Json::parse(read(kGolden / "cases.json"))[0]["messages"];
  for (const char* family : {"deepseek-v3", "kimi-k2-thinking"}) {
    const std::string source = load_chat_template(kFixtures / family).source;
    for (size_t n = 0; n <= source.size(); ++n) {
      try {
        render_chat(source.substr(0, n), messages, true);
      } catch (const Error& e) {
        BOOST_CHECK(std::string(e.what()).find("chat template") != std::string::npos);
      }
    }
  }
}
