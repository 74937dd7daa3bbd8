// The parallel runners against the one-rank runner, under mpiexec: every
// rank makes its role with make_rank_role (the factory `generate` and
// `score` use) for a pipeline and an expert-parallel layout of the same tiny
// model, on both compute paths (f32, int8); rank 0 drives a fixed script of steps (prefill chunks, decode rows,
// sampled and greedy rows, logprobs, full logits, a released and reused
// slot) through its runner, and every output must have the bits a
// LocalRunner gives for the same script. Run with 2, 3 and 4 ranks.
#define BOOST_TEST_MODULE parallel_runners
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "model_fixture.hpp"
#include "parallel/local_runner.hpp"
#include "parallel/rank_role.hpp"
#include "mpi_fixture.hpp"

using namespace trillion;
using namespace trillion::test;

namespace {

BOOST_TEST_GLOBAL_FIXTURE(MpiFixture);

constexpr int32_t kSlots = 4, kMaxLen = 32;

struct Row {
  int32_t slot, pos;
  bool wants_token;  // a logit row
  SamplingParams sampling;
};

SamplingParams greedy_with_logprobs() {
  SamplingParams p;
  p.logprobs = 1;
  p.top_logprobs = 3;
  return p;
}

SamplingParams sampled(uint64_t seed) {
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_k = 20;
  p.top_p = 0.9f;
  p.seed = seed;
  return p;
}

// The script: steps of rows over 4 slots, tokens from a fixed stream.
std::vector<StepInput> script(int64_t vocab) {
  std::vector<std::vector<Row>> steps;
  auto prefill = [](std::vector<Row>& s, int32_t slot, int32_t from, int32_t n, SamplingParams p) {
    for (int32_t i = 0; i < n; ++i) s.push_back({slot, from + i, i == n - 1, p});
  };
  std::vector<Row> a, b, c, d;
  prefill(a, 0, 0, 5, greedy_with_logprobs());
  prefill(a, 1, 0, 3, sampled(11));
  b.push_back({0, 5, true, greedy_with_logprobs()});
  b.push_back({1, 3, true, sampled(11)});
  prefill(b, 2, 0, 4, sampled(5));
  prefill(b, 3, 0, 2, SamplingParams{});
  for (int32_t s = 0; s < 4; ++s) c.push_back({s, s == 0 ? 6 : s == 1 ? 4 : s == 2 ? 4 : 2, true, sampled(uint64_t(s))});
  d.push_back({0, 7, true, greedy_with_logprobs()});
  prefill(d, 1, 0, 3, sampled(99));  // slot 1 released by this step, a new sequence in it
  d.push_back({3, 3, true, SamplingParams{}});
  steps = {a, b, c, d};

  std::vector<StepInput> out;
  const std::vector<int32_t> tokens = random_tokens(64, 3, vocab);
  size_t next = 0;
  for (size_t k = 0; k < steps.size(); ++k) {
    StepInput in;
    in.return_logits = k != 2;  // step c: chosen tokens only
    if (k == 3) in.batch.released = {1};
    for (const Row& r : steps[k]) {
      in.tokens.push_back(tokens[next++ % tokens.size()]);
      in.batch.rows.push_back({r.slot, r.pos});
      if (!r.wants_token) continue;
      in.logit_rows.push_back(in.batch.size() - 1);
      SamplingParams p = r.sampling;
      p.position = r.pos + 1;
      in.sampling.push_back(p);
    }
    out.push_back(std::move(in));
  }
  return out;
}

// Runs the script, keeping up to max_in_flight() steps submitted at once.
std::vector<StepOutput> run_script(StepRunner& runner, const std::vector<StepInput>& steps) {
  std::vector<StepOutput> outs;
  size_t submitted = 0;
  while (outs.size() < steps.size()) {
    while (submitted < steps.size() && submitted - outs.size() < size_t(runner.max_in_flight())) {
      runner.submit(submitted, steps[submitted]);
      ++submitted;
    }
    outs.push_back(runner.next());
    BOOST_TEST(outs.back().ticket == outs.size() - 1, "results come back in submission order");
  }
  return outs;
}

// Never throws (no REQUIRE): a failed check must not leave the ranks out of
// step, or the next collective would hang instead of reporting.
void check_same(const std::vector<StepOutput>& got, const std::vector<StepOutput>& want, const std::string& what) {
  BOOST_TEST_CONTEXT(what) {
    BOOST_TEST(got.size() == want.size());
    for (size_t k = 0; k < want.size() && k < got.size(); ++k) {
      BOOST_TEST_CONTEXT("step " << k) {
        const StepOutput &g = got[k], &w = want[k];
        BOOST_TEST(g.tokens == w.tokens);
        BOOST_TEST((g.logprobs.size() == w.logprobs.size() &&
                    same_bits(g.logprobs.data(), w.logprobs.data(), w.logprobs.size())));
        BOOST_TEST(g.top_logprobs.size() == w.top_logprobs.size());
        for (size_t i = 0; i < w.top_logprobs.size() && i < g.top_logprobs.size(); ++i) {
          BOOST_TEST(g.top_logprobs[i].size() == w.top_logprobs[i].size());
          for (size_t j = 0; j < w.top_logprobs[i].size() && j < g.top_logprobs[i].size(); ++j) {
            BOOST_TEST(g.top_logprobs[i][j].token == w.top_logprobs[i][j].token);
            BOOST_TEST(same_bits(&g.top_logprobs[i][j].logprob, &w.top_logprobs[i][j].logprob, 1));
          }
        }
        BOOST_TEST((g.logits.size() == w.logits.size() && same_bits(g.logits.data(), w.logits.data(), w.logits.size())));
      }
    }
  }
}

ModelSizes uniform_sizes(const ModelConfig& cfg) {
  ModelSizes s;
  s.embed = s.head = 1000;
  s.layer_dense.assign(size_t(cfg.num_hidden_layers), 1000);
  s.layer_experts.assign(size_t(cfg.num_hidden_layers), 4000);
  return s;
}

// micro_batches: pipeline steps in flight, or in expert mode groups of each
// rank's rows that take turns at the MoE layers (3 leaves a rank of the
// script's 1-2 sequences an empty group, which must still take its turns).
// head_split: lm_head rows on the first pipeline stage (with 2+ ranks).
void runners_match_one_rank(ParallelMode mode, int micro_batches = 0, bool split_head = false) {
  MpiEnv& env = mpi_env();
  for (const char* format : {"bf16", "fp8", "int4"})
   for (Activations act : {Activations::f32, Activations::int8, Activations::bf16}) {
    if (act == Activations::bf16 && std::string(format) != "fp8") continue;  // f32's bits elsewhere
    TinyModel m({.format = format, .layers = 4});
    ThreadPool pool(1);
    RunShape shape{kSlots, kMaxLen, micro_batches, /*kv_tokens=*/0, /*step_tokens=*/16, act};
    shape.min_group_rows = 1;  // the script's few rows split too
    // A split at a row count no kernel tile or FP8 block divides.
    const int64_t head_split = split_head && env.size() > 1 ? m.cfg.vocab_size / 3 + 5 : 0;
    const Layout layout = make_layout(m.cfg, uniform_sizes(m.cfg), mode, env.size(), "", head_split);
    const std::vector<StepInput> steps = script(m.cfg.vocab_size);

    std::unique_ptr<RankRole> role = make_rank_role(env, m.cfg, m.source, pool, layout, shape);
    std::vector<StepOutput> got;
    role->run([&](StepRunner& runner) {
      BOOST_TEST(runner.slots() == kSlots);
      BOOST_TEST(runner.kv_pools().pools() == (mode == ParallelMode::expert ? env.size() : 1));
      got = run_script(runner, steps);
    });
    BOOST_TEST((role->runner() != nullptr) == (env.rank() == 0));
    const std::vector<RankMetrics> all = role->gather_metrics(role->metrics());
    if (env.rank() != 0) {
      BOOST_TEST(all.empty());
      continue;
    }
    BOOST_TEST(int(all.size()) == env.size());
    for (int r = 1; r < env.size() && r < int(all.size()); ++r) {
      BOOST_TEST(all[size_t(r)].rank == r);
      BOOST_TEST(all[size_t(r)].messages_received > 0u);  // it served steps
    }
    LocalRunner local(m.cfg, m.source, pool, kSlots, kMaxLen, 0, act);
    check_same(got, run_script(local, steps), std::string(to_string(mode)) + " " + format + " " + to_string(act) +
                                                   " on " + std::to_string(env.size()) + " ranks, micro-batches " +
                                                   std::to_string(micro_batches) + ", head split " +
                                                   std::to_string(head_split));
   }
}

}  // namespace

BOOST_AUTO_TEST_CASE(pipeline_runner_matches_one_rank) { runners_match_one_rank(ParallelMode::pipeline); }

BOOST_AUTO_TEST_CASE(pipeline_with_a_split_head_matches_one_rank) {
  runners_match_one_rank(ParallelMode::pipeline, 0, true);
}

BOOST_AUTO_TEST_CASE(expert_runner_matches_one_rank) { runners_match_one_rank(ParallelMode::expert, 1); }

BOOST_AUTO_TEST_CASE(expert_runner_in_groups_matches_one_rank) { runners_match_one_rank(ParallelMode::expert, 3); }

// Rank-count errors reach every rank (the factory is collective).
BOOST_AUTO_TEST_CASE(factory_refuses_a_layout_for_other_ranks) {
  MpiEnv& env = mpi_env();
  TinyModel m({.format = "bf16", .layers = 4});
  ThreadPool pool(1);
  const Layout layout = make_layout(m.cfg, uniform_sizes(m.cfg), ParallelMode::expert, env.size() + 1);
  BOOST_CHECK_THROW(make_rank_role(env, m.cfg, m.source, pool, layout, RunShape{}), Error);
}
