#define BOOST_TEST_MODULE requests
#include <boost/test/unit_test.hpp>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <sys/resource.h>

#include "common/error.hpp"
#include "requests/jsonl.hpp"
#include "requests/request.hpp"
#include "requests/request_checks.hpp"
#include "requests/result_format.hpp"
#include "requests/resume.hpp"

using namespace trillion;
using nlohmann::json;

namespace {

Parsed<GenerateRequest> parse(const std::string& text, int64_t line = 4) {
  return parse_generate_request(JsonlLine{line, text}, 100, 50);
}

std::string error_of(const Parsed<GenerateRequest>& p) {
  const auto* e = std::get_if<RequestError>(&p);
  return e ? e->message : std::string("ok");
}

std::string openai(const std::string& url, const std::string& body) {
  return R"({"custom_id": "c1", "method": "POST", "url": ")" + url + R"(", "body": )" + body + "}";
}

}  // namespace

BOOST_AUTO_TEST_CASE(openai_completion_with_token_ids) {
  auto p = parse(openai("/v1/completions", R"({"model": "m", "prompt": [1, 2, 3], "max_tokens": 5,
      "temperature": 0.5, "top_p": 0.9, "seed": 7, "logprobs": 2})"));
  BOOST_REQUIRE_MESSAGE(std::holds_alternative<GenerateRequest>(p), error_of(p));
  const auto& r = std::get<GenerateRequest>(p);
  BOOST_TEST(r.id == "c1");
  BOOST_TEST((r.form == RequestForm::openai_completion));
  BOOST_TEST((r.prompt_token_ids == std::vector<int32_t>{1, 2, 3}));
  BOOST_TEST(r.max_tokens == 5);
  BOOST_TEST(r.model == "m");
  BOOST_TEST(r.sampling.temperature == 0.5f);
  BOOST_TEST(r.sampling.seed == 7u);
  BOOST_TEST(r.sampling.top_logprobs == 2);
  BOOST_TEST(!r.needs_tokenizer());
}

BOOST_AUTO_TEST_CASE(text_and_messages_are_carried_then_rejected_without_tokenizer) {
  std::vector<Parsed<GenerateRequest>> v;
  v.push_back(parse(openai("/v1/chat/completions",
                           R"({"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 3})")));
  v.push_back(parse(R"({"id": "p", "prompt": "Hello"})"));
  v.push_back(parse(R"({"id": "s", "prompt_token_ids": [1], "stop": ["\n"]})"));
  const auto& chat = std::get<GenerateRequest>(v[0]);
  BOOST_TEST((chat.form == RequestForm::openai_chat));
  BOOST_TEST(chat.messages.size() == 1u);
  BOOST_TEST(chat.max_tokens == 3);
  BOOST_TEST(std::get<GenerateRequest>(v[1]).prompt_text == "Hello");
  BOOST_TEST(std::get<GenerateRequest>(v[1]).needs_tokenizer());
  BOOST_TEST(std::get<GenerateRequest>(v[2]).stop.size() == 1u);
  auto copy = v;
  tokenize_prompts(v, nullptr, 100, 50);
  BOOST_TEST(error_of(v[0]).find("need the tokenizer and chat template") != std::string::npos, error_of(v[0]));
  BOOST_TEST(error_of(v[1]).find("need the tokenizer") != std::string::npos, error_of(v[1]));
  BOOST_TEST(error_of(v[2]).find("\"stop\"") != std::string::npos, error_of(v[2]));
  BOOST_TEST((std::get<RequestError>(v[0]).form == RequestForm::openai_chat));

  // With a codec: one id per byte; the chat renders as "<role>:<content>".
  TextCodec codec;
  codec.encode = [](const std::string& t) {
    std::vector<int32_t> ids;
    for (unsigned char c : t) ids.push_back(c % 100);
    return ids;
  };
  codec.render_chat = [](const json& m) { return m[0]["role"].get<std::string>() + ":" + m[0]["content"].get<std::string>(); };
  copy.push_back(parse(R"({"id": "long", "prompt": ")" + std::string(60, 'x') + R"("})"));
  tokenize_prompts(copy, &codec, 100, 50);
  BOOST_TEST(std::get<GenerateRequest>(copy[0]).prompt_token_ids.size() == 7u);  // "user:hi"
  BOOST_TEST(std::get<GenerateRequest>(copy[1]).prompt_token_ids.size() == 5u);  // "Hello"
  BOOST_TEST(error_of(copy[3]).find("more than the context of 50") != std::string::npos, error_of(copy[3]));
  // `stop` is matched on decoded text: it needs a codec that decodes, even for token-id prompts.
  BOOST_TEST(error_of(copy[2]).find("\"stop\" strings need the model's tokenizer") != std::string::npos, error_of(copy[2]));
  std::vector<Parsed<GenerateRequest>> stops{parse(R"({"id": "s", "prompt_token_ids": [1], "stop": "\n"})")};
  codec.stream = [] { return std::unique_ptr<TokenTextStream>(); };  // tokenize_prompts only asks that there is one
  tokenize_prompts(stops, &codec, 100, 50);
  BOOST_TEST(std::holds_alternative<GenerateRequest>(stops[0]));
  BOOST_TEST(error_of(parse(R"({"id": "s", "prompt_token_ids": [1], "stop": ""})")).find("empty") != std::string::npos);
  BOOST_TEST(error_of(parse(R"({"id": "s", "prompt_token_ids": [1], "stop": [1]})")).find("strings") != std::string::npos);
  BOOST_TEST(error_of(parse(openai("/v1/completions", R"({"prompt": [1], "stop": ["a", "b", "c", "d", "e"]})")))
                 .find("up to 4") != std::string::npos);
  BOOST_TEST(std::get<GenerateRequest>(parse(R"({"id": "s", "prompt_token_ids": [1], "stop": ["a", "b", "c", "d", "e"]})"))
                 .stop.size() == 5u);  // the plain form has no limit
  TextCodec text_only;
  text_only.encode = codec.encode;
  std::vector<Parsed<GenerateRequest>> w{parse(openai("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}]})"))};
  tokenize_prompts(w, &text_only, 100, 50);
  BOOST_TEST(error_of(w[0]).find("chat template") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(openai_bad_lines) {
  auto err = [](const std::string& t) { return error_of(parse(t)); };
  BOOST_TEST(err(openai("/v1/embeddings", R"({"prompt": [1]})")).find("unsupported \"url\"") != std::string::npos);
  BOOST_TEST(err(R"({"custom_id": "c", "method": "GET", "url": "/v1/completions", "body": {"prompt": [1]}})")
                 .find("method") != std::string::npos);
  BOOST_TEST(err(R"({"custom_id": "c", "url": "/v1/completions"})").find("body") != std::string::npos);
  BOOST_TEST(err(R"({"url": "/v1/completions", "body": {"prompt": [1]}})").find("missing \"custom_id\"") !=
             std::string::npos);
  BOOST_TEST(err(openai("/v1/completions", R"({"messages": [{"role": "user", "content": "x"}]})"))
                 .find("/v1/chat/completions") != std::string::npos);
  BOOST_TEST(err(openai("/v1/chat/completions", R"({"prompt": [1]})")).find("messages") != std::string::npos);
  BOOST_TEST(err(openai("/v1/completions", R"({"prompt": [1], "n": 2})")).find("\"n\"") != std::string::npos);
  BOOST_TEST(err(openai("/v1/completions", R"({"prompt": [1], "temperature": -2})")).find("temperature") !=
             std::string::npos);
  BOOST_TEST(err(openai("/v1/completions", R"({"prompt": [1, 1000]})")).find("outside the vocabulary") !=
             std::string::npos);
  BOOST_TEST(err(R"({"id": "a", "prompt": [1], "messages": []})").find("give one of") != std::string::npos);
  // An unparsable line takes the file's form.
  std::vector<Parsed<GenerateRequest>> v;
  v.push_back(parse("{oops", 1));
  v.push_back(parse(openai("/v1/completions", R"({"prompt": [1]})"), 2));
  settle_error_forms(v);
  const RequestError& e = std::get<RequestError>(v[0]);
  BOOST_TEST((e.form == RequestForm::openai_completion));
  const json rec = error_record(e);
  BOOST_TEST(rec["response"].is_null());
  BOOST_TEST(rec["custom_id"].is_null());
  BOOST_TEST(rec["error"]["message"].get<std::string>().find("line 1: not valid JSON") == 0);
  BOOST_TEST(rec["error"]["code"] == "invalid_request");
  BOOST_TEST(first_error(v, "f.jsonl").find("f.jsonl line 1:") == 0);
}

BOOST_AUTO_TEST_CASE(openai_result_shape) {
  auto p = parse(openai("/v1/completions", R"({"prompt": [1, 2], "logprobs": 1})"));
  const auto& q = std::get<GenerateRequest>(p);
  GenerationResult g{&q, {5, 6}, {-0.5f, -1.5f}, {{{5, -0.5f}}, {{7, -1.0f}}}, "length", std::nullopt, {}};
  ResultContext ctx{"tiny", 123, {}};
  const json rec = result_record(g, ctx);
  BOOST_TEST(rec["custom_id"] == "c1");
  BOOST_TEST(rec["error"].is_null());
  BOOST_TEST(rec["response"]["status_code"] == 200);
  const json& body = rec["response"]["body"];
  BOOST_TEST(body["object"] == "text_completion");
  BOOST_TEST(body["model"] == "tiny");
  BOOST_TEST(body["created"] == 123);
  BOOST_TEST(body["usage"]["total_tokens"] == 4);
  BOOST_TEST(body["choices"][0]["finish_reason"] == "length");
  BOOST_TEST((body["choices"][0]["token_ids"] == json::array({5, 6})));
  BOOST_TEST(body["choices"][0]["text"].is_null());  // no tokenizer
  BOOST_TEST(body["choices"][0]["logprobs"]["token_logprobs"][1] == -1.5f);
  BOOST_TEST(body["choices"][0]["logprobs"]["top_logprobs"][1]["7"] == -1.0f);
  ctx.decode = [](const std::vector<int32_t>& ids) { return std::string(ids.size(), 'x'); };
  BOOST_TEST(result_record(g, ctx)["response"]["body"]["choices"][0]["text"] == "xx");
}

BOOST_AUTO_TEST_CASE(recover_cuts_a_torn_line_and_lists_finished) {
  const std::string path = (std::filesystem::temp_directory_path() / "trillion_test_resume.jsonl").string();
  {
    std::ofstream f(path, std::ios::binary);
    f << R"({"id": "a", "token_ids": []})" << "\n"
      << R"({"id": null, "error": {"line": 3, "message": "bad"}})" << "\n"
      << R"({"id": "batch_req_1", "custom_id": "c", "response": {}, "error": null})" << "\n"
      << R"({"id": "b", "tok)";
  }
  const FinishedResults f = recover_results(path);
  BOOST_TEST(f.records == 3);
  BOOST_TEST(f.torn_bytes == 16);
  BOOST_TEST(f.ids.count("a") == 1u);
  BOOST_TEST(f.ids.count("c") == 1u);
  BOOST_TEST(f.ids.count("b") == 0u);
  BOOST_TEST(f.error_lines.count(3) == 1u);
  std::ifstream in(path, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  BOOST_TEST(all.back() == '\n');
  std::vector<Parsed<GenerateRequest>> v;
  v.push_back(parse(R"({"id": "a", "prompt_token_ids": [1]})", 1));
  v.push_back(parse(R"({"id": "b", "prompt_token_ids": [1]})", 2));
  v.push_back(parse("{bad", 3));
  v.push_back(parse("{bad", 4));
  BOOST_TEST(drop_finished(v, f) == 2);
  BOOST_TEST(std::get<GenerateRequest>(v[0]).id == "b");
  BOOST_TEST(std::get<RequestError>(v[1]).line == 4);
  {
    std::ofstream g(path, std::ios::binary);
    g << "not json\n";
  }
  BOOST_CHECK_THROW(recover_results(path), Error);
  std::filesystem::remove(path);
}

// A result file never ends in a torn record: a write that fails part-way (here
// at a file size limit, as on a full disk) is cut back and reported.
BOOST_AUTO_TEST_CASE(jsonl_writer_cuts_a_failed_write_back) {
  const std::string path = (std::filesystem::temp_directory_path() / "trillion_jsonl_limit.jsonl").string();
  std::filesystem::remove(path);
  std::signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of the default kill
  rlimit old{};
  getrlimit(RLIMIT_FSIZE, &old);
  {
    JsonlWriter w(path, /*append=*/false);
    w.write(json{{"id", "a"}});
    const auto first = std::filesystem::file_size(path);
    rlimit lim = old;
    lim.rlim_cur = first + 10;  // the next record gets 10 of its bytes in
    BOOST_REQUIRE(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    std::string what;
    try {
      w.write(json{{"id", "b"}, {"text", std::string(100, 'x')}});
    } catch (const SystemError& e) {
      what = e.what();
    }
    setrlimit(RLIMIT_FSIZE, &old);
    BOOST_TEST(what.find(path) != std::string::npos, what);
    BOOST_TEST(what.find(std::strerror(EFBIG)) != std::string::npos, what);
    BOOST_TEST(std::filesystem::file_size(path) == first);  // cut back to the complete record
    BOOST_TEST(w.records() == 1);
    w.write(json{{"id", "c"}});  // the writer goes on after the cut
  }
  std::ifstream in(path);
  std::string a, c, rest;
  std::getline(in, a);
  std::getline(in, c);
  BOOST_TEST(a == R"({"id":"a"})");
  BOOST_TEST(c == R"({"id":"c"})");
  BOOST_TEST(!std::getline(in, rest));
  std::filesystem::remove(path);
}

BOOST_AUTO_TEST_CASE(jsonl_writer_names_a_full_disk) {
  JsonlWriter w("/dev/full", /*append=*/true);
  std::string what;
  try {
    w.write(json{{"id", "a"}});
  } catch (const SystemError& e) {
    what = e.what();
  }
  BOOST_TEST(what.find("/dev/full: write failed: No space left on device") == 0u, what);
}

// Issue 10 item 2: a request's sizes are bounded whatever their magnitude.
BOOST_AUTO_TEST_CASE(huge_max_tokens_are_capped_at_the_context) {
  const auto p = parse(R"({"id": "a", "prompt_token_ids": [1, 2, 3], "max_tokens": 9223372036854775807})");
  const auto* r = std::get_if<GenerateRequest>(&p);
  BOOST_REQUIRE(r);
  BOOST_TEST(r->max_tokens == INT64_MAX);  // kept as asked: kv_positions caps it (test_scheduler)
  BOOST_TEST(error_of(parse(R"({"id": "a", "prompt_token_ids": [1], "max_tokens": 18446744073709551615})")) ==
             "\"max_tokens\" must be a non-negative integer");
  BOOST_TEST(error_of(parse(R"({"id": "a", "prompt_token_ids": [1], "top_logprobs": 21})")) ==
             "\"top_logprobs\" must be an integer 0..20");
  BOOST_TEST(error_of(parse(R"({"id": "a", "prompt_token_ids": [1], "n": 1000000})")) ==
             "\"n\" other than 1 is not supported");
  std::string long_prompt = R"({"id": "a", "prompt_token_ids": [1)";
  for (int i = 0; i < 60; ++i) long_prompt += ", 1";
  BOOST_TEST(error_of(parse(long_prompt + "]}")).find("50") != std::string::npos);  // the context
}

BOOST_AUTO_TEST_CASE(ignore_eos_and_min_tokens) {
  const auto p = parse(R"({"id": "a", "prompt_token_ids": [1], "max_tokens": 8, "ignore_eos": true, "min_tokens": 8})");
  BOOST_REQUIRE_MESSAGE(std::holds_alternative<GenerateRequest>(p), error_of(p));
  BOOST_TEST(std::get<GenerateRequest>(p).ignore_eos);
  BOOST_TEST(std::get<GenerateRequest>(p).min_tokens == 8);
  const auto d = parse(R"({"id": "a", "prompt_token_ids": [1]})");
  BOOST_TEST(!std::get<GenerateRequest>(d).ignore_eos);  // defaults: EOS stops, no minimum
  BOOST_TEST(std::get<GenerateRequest>(d).min_tokens == 0);
  // The OpenAI form takes them in the body (vLLM's extra parameters).
  const auto o = parse(openai("/v1/completions", R"({"prompt": [1], "max_tokens": 4, "ignore_eos": true, "min_tokens": 2})"));
  BOOST_REQUIRE_MESSAGE(std::holds_alternative<GenerateRequest>(o), error_of(o));
  BOOST_TEST(std::get<GenerateRequest>(o).min_tokens == 2);
  BOOST_TEST(error_of(parse(R"({"id": "a", "prompt_token_ids": [1], "ignore_eos": 1})")) ==
             "\"ignore_eos\" must be true or false");
  BOOST_TEST(error_of(parse(R"({"id": "a", "prompt_token_ids": [1], "min_tokens": -1})")) ==
             "\"min_tokens\" must be a non-negative integer");
  BOOST_TEST(error_of(parse(R"({"id": "a", "prompt_token_ids": [1], "min_tokens": 2.5})")) ==
             "\"min_tokens\" must be a non-negative integer");
  // max_tokens defaults to 16: a larger minimum is a contradiction, named.
  BOOST_TEST(error_of(parse(R"({"id": "a", "prompt_token_ids": [1], "min_tokens": 17})")) ==
             "\"min_tokens\" (17) must not exceed \"max_tokens\" (16)");
}
