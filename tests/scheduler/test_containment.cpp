// Issue 10, failure containment: whatever goes wrong with one request while
// it runs (non-finite logits, its detokenizer, a request the cache can never
// hold) ends that request with an error and the others finish unchanged.
#define BOOST_TEST_MODULE containment
#include <boost/test/unit_test.hpp>

#include <map>

#include "generate_all.hpp"
#include "requests/result_format.hpp"
#include "script_runner.hpp"
#include "scheduler/scheduler.hpp"

using namespace trillion;

namespace {

// Requests r0.. with prompts {k, 5}; request k gets script k.
struct Run {
  std::vector<GenerateRequest> reqs;
  std::vector<std::vector<int32_t>> scripts;
  void add(std::vector<int32_t> script, std::vector<std::string> stop = {}, int64_t max_tokens = 6) {
    GenerateRequest r;
    const size_t k = reqs.size();
    r.id = std::to_string(k).insert(0, 1, 'r');
    r.line = int64_t(k) + 1;
    r.prompt_token_ids = {int32_t(k), 5};
    r.max_tokens = max_tokens;
    r.stop = std::move(stop);
    reqs.push_back(r);
    scripts.push_back(std::move(script));
  }
  std::map<std::string, GenerationResult> go(bool with_stream = true) {
    test::ScriptRunner runner(scripts);
    SchedulerOptions o;
    if (with_stream) o.text_stream = [] { return std::make_unique<test::Stream>(); };
    return test::generate_all(runner, ModelConfig{}, o, reqs);
  }
};

const std::vector<int32_t> kHello = test::deepseek().encode("Hello there, general Kenobi");

}  // namespace

BOOST_AUTO_TEST_CASE(non_finite_logits_fail_only_their_request) {
  Run run;
  run.add(kHello);
  run.add({kHello[0], kHello[1], -1, kHello[3]});  // the head's -1: a NaN or infinite logit
  run.add(kHello, {"general"});
  auto got = run.go();
  BOOST_REQUIRE_EQUAL(got.size(), 3u);
  BOOST_TEST(got["r0"].error.empty());
  BOOST_TEST(got["r0"].token_ids == std::vector<int32_t>(kHello.begin(), kHello.begin() + 6));
  BOOST_TEST(got["r1"].error.find("not finite at position 4") != std::string::npos, got["r1"].error);
  BOOST_TEST(got["r2"].error.empty());
  BOOST_TEST(*got["r2"].text == "Hello there, ");
}

BOOST_AUTO_TEST_CASE(a_detokenizer_failure_fails_only_its_request) {
  Run run;
  // An id past the tokenizer (had the head not masked it): the stop matcher's
  // detokenizer throws; this request ends with that error, the others run.
  run.add({kHello[0], 200000, kHello[2]}, {"zzz"});
  run.add(kHello, {"zzz"});
  run.add(kHello);
  auto got = run.go();
  BOOST_REQUIRE_EQUAL(got.size(), 3u);
  BOOST_TEST(got["r0"].error.find("outside the vocabulary") != std::string::npos, got["r0"].error);
  BOOST_TEST(got["r1"].error.empty());
  BOOST_TEST(got["r1"].finish_reason == "length");
  BOOST_TEST(got["r2"].token_ids.size() == 6u);
}

BOOST_AUTO_TEST_CASE(stop_strings_without_a_tokenizer_fail_only_their_request) {
  Run run;
  run.add(kHello);
  run.add(kHello, {"x"});
  auto got = run.go(/*with_stream=*/false);
  BOOST_TEST(got["r0"].error.empty());
  BOOST_TEST(got["r0"].token_ids.size() == 6u);
  BOOST_TEST(got["r1"].error.find("no tokenizer") != std::string::npos);
  BOOST_TEST(got["r1"].token_ids.empty());
}

// A failed request's record is an error record in its own form, named by id
// and line, with code "request_failed" (a bad line's is "invalid_request").
BOOST_AUTO_TEST_CASE(failed_requests_become_error_records_in_their_form) {
  GenerateRequest plain, chat;
  plain.id = "p";
  plain.line = 4;
  chat.id = "c";
  chat.line = 9;
  chat.form = RequestForm::openai_chat;
  GenerationResult a{&plain, {1, 2}, {}, {}, "", std::nullopt, "boom"};
  GenerationResult b{&chat, {}, {}, {}, "", std::nullopt, "bang"};
  const nlohmann::json ra = result_record(a, {}), rb = result_record(b, {});
  BOOST_TEST(ra["id"] == "p");
  BOOST_TEST(ra["error"]["line"] == 4);
  BOOST_TEST(ra["error"]["message"] == "boom");
  BOOST_TEST(!ra.contains("token_ids"));
  BOOST_TEST(rb["custom_id"] == "c");
  BOOST_TEST(rb["response"].is_null());
  BOOST_TEST(rb["error"]["code"] == "request_failed");
  BOOST_TEST(rb["error"]["line"] == 9);
}
