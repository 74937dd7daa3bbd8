#define BOOST_TEST_MODULE stop_strings
#include <boost/test/unit_test.hpp>

#include <map>

#include "scheduler/scheduler.hpp"
#include "scheduler/stop_strings.hpp"
#include "generate_all.hpp"
#include "script_runner.hpp"
#include "tokenizer/tokenizer.hpp"

using namespace trillion;

namespace {

using test::deepseek;
using test::ScriptRunner;
using test::Stream;

int32_t id(const std::string& token) {
  auto t = deepseek().token_to_id(token);
  BOOST_REQUIRE_MESSAGE(t, "no token " << token);
  return *t;
}

struct Case {
  std::vector<int32_t> script;
  std::vector<std::string> stop;
  int64_t max_tokens = 100;
  bool ignore_eos = false;
  int64_t min_tokens = 0;
};

std::map<std::string, GenerationResult> run_on(ScriptRunner& runner, const std::vector<GenerateRequest>& reqs,
                                               const ModelConfig& cfg);

// `mask_eos`: the scheduler's mask_eos flag of each row it asked for, by (request index, generated count).
std::map<std::string, GenerationResult> run(const std::vector<Case>& cases, ModelConfig cfg = {},
                                            std::map<std::pair<int, int>, int>* mask_eos = nullptr) {
  static std::vector<GenerateRequest> reqs;  // results point at them
  reqs.clear();
  std::vector<std::vector<int32_t>> scripts;
  for (size_t k = 0; k < cases.size(); ++k) {
    GenerateRequest r;
    r.id = std::to_string(k).insert(0, 1, 'r');  // (not "r" + ...: GCC 12 -Wrestrict false positive)
    r.prompt_token_ids = {int32_t(k), 5};
    r.max_tokens = cases[k].max_tokens;
    r.stop = cases[k].stop;
    r.ignore_eos = cases[k].ignore_eos;
    r.min_tokens = cases[k].min_tokens;
    reqs.push_back(r);
    scripts.push_back(cases[k].script);
  }
  ScriptRunner runner(scripts);
  auto got = run_on(runner, reqs, cfg);
  if (mask_eos) *mask_eos = runner.mask_eos;
  return got;
}

std::map<std::string, GenerationResult> run_on(ScriptRunner& runner, const std::vector<GenerateRequest>& reqs,
                                               const ModelConfig& cfg) {
  SchedulerOptions o;
  o.text_stream = [] { return std::make_unique<Stream>(); };
  return test::generate_all(runner, cfg, o, reqs);
}

}  // namespace

BOOST_AUTO_TEST_CASE(matcher_holds_back_possible_prefixes) {
  StopMatcher m({"abc", "xyz"});
  BOOST_TEST(!m.push("12a"));
  BOOST_TEST(m.text() == "12");  // "a" may start "abc"
  BOOST_TEST(!m.push("b"));
  BOOST_TEST(m.text() == "12");
  BOOST_TEST(!m.push("d"));
  BOOST_TEST(m.text() == "12abd");
  BOOST_TEST(!m.push("x"));
  BOOST_TEST(m.held_back() == 1u);
  BOOST_TEST(m.push("yzabc"));
  BOOST_TEST(m.text() == "12abd");
  BOOST_TEST(m.push("more"));  // stays stopped: nothing after the cut, ever
  BOOST_TEST(m.text() == "12abd");
  StopMatcher n({"ab"});
  n.push("xa");
  n.finish();
  BOOST_TEST(n.text() == "xa");
}

BOOST_AUTO_TEST_CASE(stop_string_spanning_tokens) {
  const std::vector<int32_t> script = deepseek().encode("Hello world, this is the end. More text");
  BOOST_REQUIRE(script.size() > 6);
  auto got = run({{script, {"the end"}}});
  const GenerationResult& r = got.at("r0");
  BOOST_TEST(r.finish_reason == "stop");
  BOOST_REQUIRE(r.text.has_value());
  BOOST_TEST(*r.text == "Hello world, this is ");
  // token_ids end with the token that completed the stop string
  const std::string all = deepseek().decode(r.token_ids);
  BOOST_TEST(all.find("the end") != std::string::npos);
  const std::vector<int32_t> fewer(r.token_ids.begin(), r.token_ids.end() - 1);
  BOOST_TEST(deepseek().decode(fewer).find("the end") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(stop_inside_a_multibyte_character) {
  // "é" = C3 A9 as two byte tokens: the stop completes on the second byte.
  const std::vector<int32_t> script = {id("ab"), id("\xC3"), id("\xA9"), id("cd"), id("ef")};
  auto got = run({{script, {"\xC3\xA9" "c"}}, {script, {"\xC3\xA9"}}, {script, {"z"}}});
  BOOST_TEST(got.at("r0").finish_reason == "stop");
  BOOST_TEST(*got.at("r0").text == "ab");
  BOOST_TEST(got.at("r0").token_ids.size() == 4u);
  BOOST_TEST(*got.at("r1").text == "ab");
  BOOST_TEST(got.at("r1").token_ids.size() == 3u);  // ab, C3, A9
  BOOST_TEST(got.at("r2").finish_reason == "length");
}

BOOST_AUTO_TEST_CASE(earliest_of_several_stop_strings_wins) {
  const std::vector<int32_t> script = deepseek().encode("one two three four five");
  // " two" completes first, though "five" and "three" are listed before it.
  auto got = run({{script, {"five", "three", "two"}}, {script, {"two three", "three"}}});
  BOOST_TEST(*got.at("r0").text == "one ");
  BOOST_TEST(*got.at("r1").text == "one ");  // both complete with " three": the earlier start wins
}

BOOST_AUTO_TEST_CASE(stop_at_the_very_first_token) {
  const std::vector<int32_t> script = deepseek().encode("Hello there");
  auto got = run({{script, {"Hel"}}});
  BOOST_TEST(got.at("r0").finish_reason == "stop");
  BOOST_TEST(*got.at("r0").text == "");
  BOOST_TEST(got.at("r0").token_ids.size() == 1u);
}

BOOST_AUTO_TEST_CASE(no_match_keeps_everything) {
  const std::vector<int32_t> script = deepseek().encode("Hello there, general");
  ModelConfig cfg;
  auto got = run({{script, {"xyz", "Hello!"}, int64_t(script.size())}}, cfg);
  BOOST_TEST(got.at("r0").finish_reason == "length");
  BOOST_TEST(*got.at("r0").text == "Hello there, general");
  BOOST_TEST(got.at("r0").token_ids == script);
}

BOOST_AUTO_TEST_CASE(eos_before_the_stop_string) {
  ModelConfig cfg;
  const int32_t eos = *deepseek().eos_id;
  cfg.eos_token_ids = {eos};
  std::vector<int32_t> script = deepseek().encode("abc");
  script.push_back(eos);
  auto got = run({{script, {"zzz"}}}, cfg);
  BOOST_TEST(got.at("r0").finish_reason == "stop");
  BOOST_TEST(*got.at("r0").text == "abc");  // the special EOS token is not text
}

BOOST_AUTO_TEST_CASE(ignore_eos_generates_through_eos) {
  ModelConfig cfg;
  const int32_t eos = *deepseek().eos_id;
  cfg.eos_token_ids = {eos};
  std::vector<int32_t> script = deepseek().encode("abc");
  script.push_back(eos);
  for (int32_t t : deepseek().encode(" de")) script.push_back(t);
  Case c{script, {}, int64_t(script.size())};
  c.ignore_eos = true;
  auto got = run({c, {script, {}, int64_t(script.size())}}, cfg);
  BOOST_TEST(got.at("r0").finish_reason == "length");
  BOOST_TEST(got.at("r0").token_ids == script);  // EOS among them, exactly max_tokens long
  // Without ignore_eos the same script ends at EOS.
  BOOST_TEST(got.at("r1").finish_reason == "stop");
  BOOST_TEST(got.at("r1").token_ids.size() == deepseek().encode("abc").size() + 1);
}

BOOST_AUTO_TEST_CASE(min_tokens_masks_eos_and_defers_stop_strings) {
  ModelConfig cfg;
  const int32_t eos = *deepseek().eos_id;
  cfg.eos_token_ids = {eos};
  // "x zzz" then " y zzz" then " w": the first stop string completes at
  // token n1, before min_tokens = n1 + 1, so only the second one cuts.
  const std::vector<int32_t> a = deepseek().encode("x zzz"), b = deepseek().encode(" y zzz"),
                             w = deepseek().encode(" w");
  std::vector<int32_t> script = a;
  script.insert(script.end(), b.begin(), b.end());
  script.insert(script.end(), w.begin(), w.end());
  Case c{script, {"zzz"}};
  c.min_tokens = int64_t(a.size()) + 1;
  // EOS as the second token: with min_tokens 3 it does not stop (a real
  // model could not even choose it: the row asks for EOS masked).
  std::vector<int32_t> eos_early = {a[0], eos, a[0], eos, a[0]};
  Case e{eos_early, {}, 10};
  e.min_tokens = 3;
  std::map<std::pair<int, int>, int> mask;
  auto got = run({c, e}, cfg, &mask);
  BOOST_TEST(got.at("r0").finish_reason == "stop");
  BOOST_TEST(*got.at("r0").text == "x zzz y ");
  BOOST_TEST(got.at("r0").token_ids.size() == a.size() + b.size());
  BOOST_TEST(got.at("r1").finish_reason == "stop");
  BOOST_TEST(got.at("r1").token_ids.size() == 4u);  // the EOS at the 4th token (past min_tokens) ends it
  // Rows choosing generated tokens 0, 1, 2 mask EOS; from the 4th on they do not.
  for (int k = 0; k < 4; ++k) BOOST_TEST(mask.at({1, k}) == (k < 3 ? 1 : 0), "token " << k);
}

BOOST_AUTO_TEST_CASE(matcher_pass_is_never_matched) {
  StopMatcher m({"abc"});
  m.pass("xab");
  BOOST_TEST(m.text() == "xab");  // nothing held back
  BOOST_TEST(!m.push("c"));       // "abc" would begin inside the passed text
  BOOST_TEST(m.text() == "xabc");
  BOOST_TEST(m.push("zabcq"));
  BOOST_TEST(m.text() == "xabcz");
}
