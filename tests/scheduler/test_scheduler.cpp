#define BOOST_TEST_MODULE scheduler
#include <boost/test/unit_test.hpp>

#include <map>
#include <set>

#include "scheduler/kv_admission.hpp"
#include "scheduler/scheduler.hpp"
#include "generate_all.hpp"
#include "requests/request_checks.hpp"

using namespace trillion;

namespace {

// A fake model: the next token after `tok` at position `pos` is (3*tok + pos) % V,
// unless the slot's cache is inconsistent (a row whose earlier positions are not
// cached), which the fake records as a failure.
class FakeRunner : public StepRunner {
 public:
  FakeRunner(int32_t slots, int32_t max_len, int in_flight = 1, int32_t block = 0, int64_t pool_blocks = 0)
      : slots_(slots), max_len_(max_len), in_flight_(in_flight), cache_(static_cast<size_t>(slots)),
        block_(block), pool_blocks_(pool_blocks), held_(static_cast<size_t>(slots)) {}
  KvPools kv_pools() const override { return block_ > 0 ? KvPools(pools, pool_blocks_, block_) : KvPools(); }
  int max_in_flight() const override { return in_flight_; }
  StepOutput next() override {
    StepOutput o = std::move(queue_.front());
    queue_.erase(queue_.begin());
    return o;
  }
  int64_t vocab_size() const override { return V; }
  int32_t slots() const override { return slots_; }
  int32_t max_len() const override { return max_len_; }
  void submit(uint64_t ticket, const StepInput& in) override {
    ++steps;
    inputs.push_back(in);
    if (int(queue_.size()) >= in_flight_) consistent = false;  // more in flight than allowed
    max_rows = std::max<int64_t>(max_rows, in.batch.size());
    // A paged pool as KvCache keeps it: released slots first, then each row's block.
    for (int32_t s : in.batch.released) held_[size_t(s)] = 0;
    for (const TokenRow& r : in.batch.rows) {
      if (r.pos == 0) held_[size_t(r.slot)] = 0;
      if (block_ > 0) held_[size_t(r.slot)] = std::max<int64_t>(held_[size_t(r.slot)], r.pos / block_ + 1);
    }
    for (int32_t p = 0; p < pools; ++p) {
      int64_t held = 0;
      for (size_t slot = size_t(p); slot < held_.size(); slot += size_t(pools)) held += held_[slot];
      max_held = std::max(max_held, held);
      if (block_ > 0 && held > pool_blocks_) consistent = false;  // a pool ran dry
    }
    for (int64_t i = 0; i < in.batch.size(); ++i) {
      const TokenRow r = in.batch.rows[size_t(i)];
      auto& c = cache_[size_t(r.slot)];
      if (r.pos > int32_t(c.size()) || r.pos >= max_len_) consistent = false;
      c.resize(size_t(r.pos));
      c.push_back(in.tokens[size_t(i)]);
    }
    StepOutput out;
    out.ticket = ticket;
    if (!in.sampling.empty() && in.sampling.size() != in.logit_rows.size()) consistent = false;
    for (size_t j = 0; j < in.logit_rows.size(); ++j) {
      const int64_t i = in.logit_rows[j];
      const TokenRow r = in.batch.rows[size_t(i)];
      // The random stream's counter is the position of the token being chosen.
      if (!in.sampling.empty() && in.sampling[j].position != r.pos + 1) consistent = false;
      if (!in.sampling.empty()) limits.insert(in.sampling[j].token_limit);
      out.tokens.push_back((3 * in.tokens[size_t(i)] + r.pos) % V);
    }
    queue_.push_back(std::move(out));
  }
  static constexpr int V = 11;
  int32_t pools = 1;  // KV pools (expert parallel: one per rank, slot s in pool s % pools)
  int64_t steps = 0, max_rows = 0, max_held = 0;
  std::vector<StepInput> inputs;  // every submitted step
  bool consistent = true;
  std::set<int32_t> limits;  // token_limit of every chosen row's params

 private:
  int32_t slots_, max_len_;
  int in_flight_;
  std::vector<std::vector<int32_t>> cache_;
  std::vector<StepOutput> queue_;
  int32_t block_;
  int64_t pool_blocks_;
  std::vector<int64_t> held_;  // [slot] blocks
};

std::vector<int32_t> expected(const GenerateRequest& r, const std::vector<int64_t>& eos, int64_t max_len,
                              std::string* reason) {
  std::vector<int32_t> seq = r.prompt_token_ids, out;
  *reason = "length";
  while (int64_t(out.size()) < r.max_tokens) {
    const int32_t next = (3 * seq.back() + int32_t(seq.size() - 1)) % FakeRunner::V;
    out.push_back(next);
    seq.push_back(next);
    if (std::find(eos.begin(), eos.end(), next) != eos.end()) { *reason = "stop"; break; }
    if (int64_t(seq.size()) >= max_len) break;
  }
  return out;
}

// Requests r0..r{count-1}: request i has prompt_len(i) tokens ((t*7 + i) % 10)
// and max_tokens(i).
template <class PromptLen, class MaxTokens>
std::vector<GenerateRequest> numbered_requests(int count, PromptLen prompt_len, MaxTokens max_tokens) {
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < count; ++i) {
    GenerateRequest r;
    r.id = "r" + std::to_string(i);
    for (int t = 0; t < prompt_len(i); ++t) r.prompt_token_ids.push_back((t * 7 + i) % 10);
    r.max_tokens = max_tokens(i);
    reqs.push_back(r);
  }
  return reqs;
}

}  // namespace

BOOST_AUTO_TEST_CASE(results_do_not_depend_on_slots_or_step_budget) {
  ModelConfig cfg;
  cfg.eos_token_ids = {10};
  const auto reqs = numbered_requests(9, [](int i) { return i * 3 + 1; },
                                      [](int i) { return (i % 4) * 5; });  // max_tokens includes 0
  for (int32_t slots : {1, 2, 4, 16}) {
    for (int64_t budget : {1, 3, 256}) {
     for (int in_flight : {1, 2, 3}) {
      FakeRunner runner(slots, 40, in_flight);
      SchedulerOptions opts;
      opts.step_tokens = budget;
      auto got = test::generate_all(runner, cfg, opts, reqs);
      BOOST_TEST(runner.consistent);
      BOOST_TEST(runner.max_rows <= slots + budget);
      BOOST_REQUIRE_EQUAL(got.size(), reqs.size());
      for (auto& r : reqs) {
        std::string reason;
        auto want = expected(r, cfg.eos_token_ids, 40, &reason);
        BOOST_TEST(got[r.id].token_ids == want, r.id << " slots " << slots << " budget " << budget);
        BOOST_TEST(got[r.id].finish_reason == reason, r.id);
      }
     }
    }
  }
}

BOOST_AUTO_TEST_CASE(context_limit_ends_with_length) {
  ModelConfig cfg;
  GenerateRequest r;
  r.id = "x";
  r.prompt_token_ids = {1, 2, 3};
  r.max_tokens = 100;
  FakeRunner runner(1, 6);
  Scheduler gen(runner, cfg);
  std::vector<GenerationResult> got;
  gen.run({&r}, [&](const GenerationResult& g) { got.push_back(g); });
  BOOST_REQUIRE_EQUAL(got.size(), 1u);
  BOOST_TEST(got[0].token_ids.size() == 3u);  // 3 prompt + 3 generated = the 6-position context
  BOOST_TEST(got[0].finish_reason == "length");
  BOOST_TEST(runner.consistent);
}

BOOST_AUTO_TEST_CASE(request_lines_parse_and_fail_with_messages) {
  auto err = [](const std::string& text) {
    auto p = parse_generate_request(JsonlLine{7, text}, 100, 50);
    auto* e = std::get_if<RequestError>(&p);
    return e ? e->message : std::string("ok");
  };
  BOOST_TEST(err(R"({"id": "a", "prompt_token_ids": [1, 2], "max_tokens": 3})") == "ok");
  BOOST_TEST(err(R"({"id": 5, "prompt_token_ids": [1]})") == "ok");
  BOOST_TEST(err(R"({"id": "a", "prompt_token_ids": [1, 100]})").find("outside the vocabulary") != std::string::npos);
  BOOST_TEST(err(R"({"id": "a", "prompt_token_ids": [1.5]})").find("not an integer") != std::string::npos);
  BOOST_TEST(err(R"({"id": "a", "prompt_token_ids": [1], "max_tokens": -1})").find("max_tokens") != std::string::npos);
  BOOST_TEST(err(R"([1, 2])").find("JSON object") != std::string::npos);
  BOOST_TEST(err(R"({"id": "a"})").find("missing \"prompt_token_ids\"") != std::string::npos);
  std::string long_prompt = R"({"id": "a", "prompt_token_ids": [)";
  for (int i = 0; i < 51; ++i) long_prompt += (i ? ",1" : "1");
  BOOST_TEST(err(long_prompt + "]}").find("more than the context of 50") != std::string::npos);
  auto p = parse_generate_request(JsonlLine{7, "{oops"}, 100, 50);
  BOOST_TEST(std::get<RequestError>(p).line == 7);
}

// A KV pool smaller than slots x context: requests wait for blocks, the pool
// never runs dry, results are unchanged.
BOOST_AUTO_TEST_CASE(kv_pool_limits_admission_not_results) {
  ModelConfig cfg;
  cfg.eos_token_ids = {10};
  const auto reqs = numbered_requests(12, [](int i) { return (i * 5) % 23 + 1; },
                                      [](int i) { return 3 + (i % 4) * 4; });
  for (int in_flight : {1, 2}) {
    FakeRunner runner(6, 40, in_flight, /*block=*/4, /*pool_blocks=*/10);  // 40 positions for 6 slots
    SchedulerOptions opts;
    opts.step_tokens = 5;
    auto got = test::generate_all(runner, cfg, opts, reqs);
    BOOST_TEST(runner.consistent);
    BOOST_TEST(runner.max_held <= 10);
    BOOST_REQUIRE_EQUAL(got.size(), reqs.size());
    for (auto& r : reqs) {
      std::string reason;
      BOOST_TEST(got[r.id].token_ids == expected(r, cfg.eos_token_ids, 40, &reason), r.id);
      BOOST_TEST(got[r.id].finish_reason == reason, r.id);
    }
  }
}

BOOST_AUTO_TEST_CASE(requests_larger_than_the_pool_are_errors) {
  std::vector<Parsed<GenerateRequest>> parsed;
  parsed.push_back(parse_generate_request(JsonlLine{1, R"({"id": "a", "prompt_token_ids": [1, 2], "max_tokens": 6})"}, 100, 50));
  parsed.push_back(parse_generate_request(JsonlLine{2, R"({"id": "b", "prompt_token_ids": [1, 2], "max_tokens": 7})"}, 100, 50));
  reject_unfittable(parsed, 50, KvPools(1, /*blocks=*/2, /*block_tokens=*/4));
  BOOST_TEST(std::holds_alternative<GenerateRequest>(parsed[0]));  // 8 positions: 2 blocks
  BOOST_REQUIRE(std::holds_alternative<RequestError>(parsed[1]));
  BOOST_TEST(std::get<RequestError>(parsed[1]).line == 2);
  BOOST_TEST(std::get<RequestError>(parsed[1]).message.find("--kv-cache-tokens") != std::string::npos);
  std::vector<Parsed<GenerateRequest>> capped;
  capped.push_back(parse_generate_request(JsonlLine{3, R"({"id": "c", "prompt_token_ids": [1, 2], "max_tokens": 99})"}, 100, 8));
  reject_unfittable(capped, 8, KvPools(1, 2, 4));  // capped at the context of 8: fits
  // A max_tokens near INT64_MAX is capped before the add (the sum overflowed to a negative count once).
  const GenerateRequest huge = std::get<GenerateRequest>(parse_generate_request(
      JsonlLine{4, R"({"id": "d", "prompt_token_ids": [1, 2, 3], "max_tokens": 9223372036854775807})"}, 100, 50));
  BOOST_TEST(kv_positions(huge, 50) == 50);
  BOOST_TEST(std::holds_alternative<GenerateRequest>(capped[0]));
}

// The tokenizer's size reaches every row the head chooses a token for (the
// head then never picks a padding id: tests/sampling).
BOOST_AUTO_TEST_CASE(token_limit_travels_with_every_row) {
  FakeRunner runner(3, 40);
  std::vector<GenerateRequest> reqs(5);
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].id = "r" + std::to_string(i);
    reqs[i].prompt_token_ids = {int32_t(i + 1), 2, 3};
    reqs[i].max_tokens = 4;
  }
  SchedulerOptions opts;
  opts.token_limit = 7;
  const ModelConfig cfg = [] {
    ModelConfig c;
    c.vocab_size = FakeRunner::V;
    return c;
  }();
  std::vector<const GenerateRequest*> ptrs;
  for (const auto& r : reqs) ptrs.push_back(&r);
  int done = 0;
  Scheduler(runner, cfg, opts).run(ptrs, [&](const GenerationResult&) { ++done; });
  BOOST_TEST(done == 5);
  BOOST_TEST(runner.limits == std::set<int32_t>{7});
}

// reject_unfittable keeps such requests out of a run; should one reach the
// scheduler, it fails alone instead of ending the job.
BOOST_AUTO_TEST_CASE(a_request_the_pool_cannot_hold_fails_alone) {
  ModelConfig cfg;
  auto reqs = numbered_requests(3, [](int) { return 3; }, [](int i) { return i == 1 ? 30 : 4; });
  FakeRunner runner(2, 40, 1, /*block=*/4, /*pool_blocks=*/4);  // 16 positions: r1 needs 33
  auto got = test::generate_all(runner, cfg, SchedulerOptions{}, reqs);
  BOOST_REQUIRE_EQUAL(got.size(), 3u);
  BOOST_TEST(got["r1"].error.find("KV-cache") != std::string::npos);
  BOOST_TEST(got["r1"].token_ids.empty());
  for (const char* id : {"r0", "r2"}) {
    std::string reason;
    BOOST_TEST(got[id].error.empty());
    BOOST_TEST(got[id].token_ids == expected(reqs[id[1] == '0' ? 0 : 2], cfg.eos_token_ids, 40, &reason), id);
  }
  BOOST_TEST(runner.consistent);
}

// A graceful stop (SIGTERM): once should_stop is true nothing more is
// submitted, the steps in flight finish, every request reported is complete
// and correct, and run() says it stopped early.
BOOST_AUTO_TEST_CASE(should_stop_ends_the_run_within_one_step) {
  ModelConfig cfg;
  cfg.eos_token_ids = {10};
  const auto reqs = numbered_requests(10, [](int i) { return i % 4 + 1; }, [](int i) { return 2 + i % 5; });
  std::vector<const GenerateRequest*> ptrs;
  for (const auto& r : reqs) ptrs.push_back(&r);
  for (int in_flight : {1, 3}) {
    for (int64_t stop_after : {0, 1, 4}) {
      FakeRunner runner(4, 40, in_flight);
      SchedulerOptions opts;
      opts.step_tokens = 2;
      int64_t steps_at_stop = -1;
      opts.should_stop = [&] {
        if (runner.steps >= stop_after && steps_at_stop < 0) steps_at_stop = runner.steps;
        return steps_at_stop >= 0;
      };
      std::map<std::string, GenerationResult> got;
      const bool finished = Scheduler(runner, cfg, opts).run(ptrs, [&](const GenerationResult& r) { got[r.request->id] = r; });
      BOOST_TEST(!finished);
      BOOST_TEST(runner.steps == steps_at_stop, "nothing submitted after the stop, in_flight " << in_flight);
      BOOST_TEST(got.size() < reqs.size());
      BOOST_TEST(runner.consistent);
      for (const auto& [id, res] : got) {
        std::string reason;
        const GenerateRequest& r = *res.request;
        BOOST_TEST(res.token_ids == expected(r, cfg.eos_token_ids, 40, &reason), id);
      }
    }
  }
  // Never asked to stop: run() reports a finished run.
  FakeRunner runner(4, 40);
  SchedulerOptions opts;
  opts.should_stop = [] { return false; };
  int done = 0;
  BOOST_TEST(Scheduler(runner, cfg, opts).run(ptrs, [&](const GenerationResult&) { ++done; }));
  BOOST_TEST(done == int(reqs.size()));
}

// The warm-up step: one step before the run, one slot per KV pool from
// position 0, the last row of each a logit row; not counted as a run step;
// its slots are released by the first real step (else the pool, which the
// ledger believes empty, runs dry: the fake checks every pool), and the
// requests' tokens are those of a run without it.
BOOST_AUTO_TEST_CASE(warm_up_step_is_released_and_changes_no_result) {
  ModelConfig cfg;
  cfg.eos_token_ids = {10};
  const auto reqs = numbered_requests(7, [](int i) { return (i * 5) % 13 + 1; }, [](int i) { return 3 + i % 4; });
  for (int32_t pools : {1, 2}) {
    for (int in_flight : {1, 2}) {
      // 10 blocks of 4 per pool; the warm-up asks for 100 rows: 40 per slot at most.
      FakeRunner runner(4, 40, in_flight, /*block=*/4, /*pool_blocks=*/10);
      runner.pools = pools;
      std::vector<const GenerateRequest*> ptrs;
      for (const auto& r : reqs) ptrs.push_back(&r);
      Scheduler gen(runner, cfg, SchedulerOptions{});
      gen.warm_up(100);
      BOOST_REQUIRE_EQUAL(runner.inputs.size(), 1u);
      const StepInput& w = runner.inputs[0];
      BOOST_TEST(w.batch.size() == 40 * pools);
      BOOST_TEST(gen.stats().warmup_rows == 40 * pools);
      BOOST_TEST(w.logit_rows.size() == size_t(pools));
      for (int64_t i = 0; i < w.batch.size(); ++i) {
        const int32_t slot = int32_t(i / 40), pos = int32_t(i % 40);
        BOOST_TEST(w.batch.rows[size_t(i)].slot == slot);
        BOOST_TEST(w.batch.rows[size_t(i)].pos == pos);
        BOOST_TEST((w.tokens[size_t(i)] >= 0 && w.tokens[size_t(i)] < FakeRunner::V));
      }
      std::map<std::string, GenerationResult> got;
      BOOST_TEST(gen.run(ptrs, [&](const GenerationResult& r) { got[r.request->id] = r; }));
      BOOST_TEST(runner.consistent, "pools " << pools << " in_flight " << in_flight);
      BOOST_REQUIRE(runner.inputs.size() > 1u);
      std::vector<int32_t> want_released;
      for (int32_t p = 0; p < pools; ++p) want_released.push_back(p);
      BOOST_TEST(runner.inputs[1].batch.released == want_released);
      BOOST_TEST(gen.stats().steps == runner.steps - 1);
      BOOST_REQUIRE_EQUAL(got.size(), reqs.size());
      for (const auto& r : reqs) {
        std::string reason;
        BOOST_TEST(got[r.id].token_ids == expected(r, cfg.eos_token_ids, 40, &reason), r.id);
      }
    }
  }
}
