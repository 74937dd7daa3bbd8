// The forward pass's determinism contract on random models in every format:
// prefill equals decode bit for bit; a sequence's logits do not depend on its
// batch neighbours, its slot or the thread count. Plus input checks and the
// TRILLION_DUMP hook.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "common/error.hpp"
#include "model_fixture.hpp"

using namespace trillion;
using namespace trillion::test;

namespace {

const std::vector<TinyModelOptions> kVariants = {
    {.format = "bf16"},
    {.format = "fp8", .hidden = 160},
    {.format = "int4"},
    {.format = "bf16", .q_lora = false, .n_group = 1},
};

std::string name_of(const TinyModelOptions& o) {
  return o.format + (o.q_lora ? "" : " q_proj") + (o.n_group == 1 ? " n_group 1" : "") + " d " + std::to_string(o.hidden);
}

}  // namespace

BOOST_AUTO_TEST_CASE(prefill_equals_decode) {
  for (const TinyModelOptions& opt : kVariants) {
    BOOST_TEST_CONTEXT(name_of(opt)) {
      TinyModel m(opt);
      ThreadPool pool(2);
      Transformer model(m.cfg, LayerRange{0, m.cfg.num_hidden_layers, true, true}, m.source, pool);
      const int T = 9;
      const int64_t V = m.cfg.vocab_size;
      const auto tokens = random_tokens(T, 11, int(V));

      KvCache c1(m.cfg, model.range(), 1, 16);
      const auto prefill = run_step(model, c1, rows_of(0, 0, T), tokens);
      for (float v : prefill) BOOST_REQUIRE(std::isfinite(v));

      KvCache c2(m.cfg, model.range(), 1, 16);
      for (int t = 0; t < T; ++t) {
        const auto one = run_step(model, c2, rows_of(0, t, 1), {tokens[size_t(t)]});
        BOOST_TEST(same_bits(one.data(), &prefill[size_t(t * V)], size_t(V)), "token " << t);
      }

      KvCache c3(m.cfg, model.range(), 1, 16);  // chunks of 4 and 5
      const auto a = run_step(model, c3, rows_of(0, 0, 4), {tokens.begin(), tokens.begin() + 4});
      const auto b = run_step(model, c3, rows_of(0, 4, 5), {tokens.begin() + 4, tokens.end()});
      BOOST_TEST(same_bits(a.data(), prefill.data(), a.size()));
      BOOST_TEST(same_bits(b.data(), &prefill[size_t(4 * V)], b.size()));
    }
  }
}

// Sequence A alone in slot 0, then among B and C (mixed prefill and decode
// rows, A in slot 2): A's logits keep their bits at every step.
BOOST_AUTO_TEST_CASE(batch_invariance) {
  for (const TinyModelOptions& opt : kVariants) {
    BOOST_TEST_CONTEXT(name_of(opt)) {
      TinyModel m(opt);
      ThreadPool pool(2);
      Transformer model(m.cfg, LayerRange{0, m.cfg.num_hidden_layers, true, true}, m.source, pool);
      const int64_t V = m.cfg.vocab_size;
      const auto A = random_tokens(8, 21, int(V)), B = random_tokens(6, 22, int(V)), C = random_tokens(5, 23, int(V));

      KvCache alone_cache(m.cfg, model.range(), 1, 16);
      const auto a1 = run_step(model, alone_cache, rows_of(0, 0, 6), {A.begin(), A.begin() + 6});
      const auto a2 = run_step(model, alone_cache, rows_of(0, 6, 1), {A[6]});
      const auto a3 = run_step(model, alone_cache, rows_of(0, 7, 1), {A[7]});

      KvCache mixed(m.cfg, model.range(), 3, 16);
      // Step 1: B prefill (slot 0), A prefill (slot 2), C prefill (slot 1).
      Batch s1 = rows_of(0, 0, 5);
      for (const auto& r : rows_of(2, 0, 6).rows) s1.rows.push_back(r);
      for (const auto& r : rows_of(1, 0, 3).rows) s1.rows.push_back(r);
      std::vector<int32_t> t1(B.begin(), B.begin() + 5);
      t1.insert(t1.end(), A.begin(), A.begin() + 6);
      t1.insert(t1.end(), C.begin(), C.begin() + 3);
      const auto m1 = run_step(model, mixed, s1, t1);
      BOOST_TEST(same_bits(&m1[size_t(5 * V)], a1.data(), a1.size()));
      // Step 2: decode A, B, and two more prefill rows of C.
      const Batch s2{{{1, 3}, {2, 6}, {0, 5}, {1, 4}}};
      const auto m2 = run_step(model, mixed, s2, {C[3], A[6], B[5], C[4]});
      BOOST_TEST(same_bits(&m2[size_t(1 * V)], a2.data(), a2.size()));
      // Step 3: A alone again.
      const auto m3 = run_step(model, mixed, Batch{{{2, 7}}}, {A[7]});
      BOOST_TEST(same_bits(m3.data(), a3.data(), a3.size()));
    }
  }
}

// Rows in groups that take turns at the MoE layers (expert mode's schedule,
// Transformer::set_groups) keep their bits: two steps of mixed prefill and
// decode rows, a sequence's rows not adjacent in the second, and more groups
// than sequences (empty groups) in the last.
BOOST_AUTO_TEST_CASE(row_groups_keep_the_bits) {
  for (const TinyModelOptions& opt : kVariants) {
    BOOST_TEST_CONTEXT(name_of(opt)) {
      TinyModel m(opt);
      ThreadPool pool(2);
      const int64_t V = m.cfg.vocab_size;
      const auto tokens = random_tokens(16, 41, int(V));
      Batch s1 = rows_of(0, 0, 5);
      for (const auto& r : rows_of(2, 0, 2).rows) s1.rows.push_back(r);
      for (const auto& r : rows_of(1, 0, 3).rows) s1.rows.push_back(r);
      const Batch s2{{{1, 3}, {2, 2}, {0, 5}, {1, 4}, {2, 3}}};
      const Batch s3{{{0, 6}}};
      std::vector<std::vector<float>> first;
      for (int groups : {1, 2, 3, 5}) {
        BOOST_TEST_CONTEXT("groups " << groups) {
          Transformer model(m.cfg, LayerRange{0, m.cfg.num_hidden_layers, true, true}, m.source, pool);
          model.set_groups(groups, /*min_group_rows=*/1);
          KvCache cache(m.cfg, model.range(), 3, 16);
          std::vector<std::vector<float>> got;
          got.push_back(run_step(model, cache, s1, {tokens.begin(), tokens.begin() + 10}));
          got.push_back(run_step(model, cache, s2, {tokens.begin() + 10, tokens.begin() + 15}));
          got.push_back(run_step(model, cache, s3, {tokens[15]}));
          for (const auto& g : got)
            for (float v : g) BOOST_REQUIRE(std::isfinite(v));
          if (first.empty()) first = got;
          for (size_t k = 0; k < got.size(); ++k)
            BOOST_TEST(same_bits(got[k].data(), first[k].data(), first[k].size()), "step " << k + 1);
        }
      }
    }
  }
  TinyModel m;
  ThreadPool pool(1);
  Transformer model(m.cfg, LayerRange{0, m.cfg.num_hidden_layers, true, true}, m.source, pool);
  BOOST_CHECK_THROW(model.set_groups(0), InputError);
  BOOST_CHECK_THROW(model.set_groups(2, 0), InputError);
}

BOOST_AUTO_TEST_CASE(thread_count_invariance) {
  TinyModel m({.format = "fp8", .hidden = 160});
  const auto tokens = random_tokens(7, 31, int(m.cfg.vocab_size));
  Batch batch = rows_of(0, 0, 4);
  for (const auto& r : rows_of(1, 0, 3).rows) batch.rows.push_back(r);
  std::vector<float> first;
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    Transformer model(m.cfg, LayerRange{0, m.cfg.num_hidden_layers, true, true}, m.source, pool);
    KvCache cache(m.cfg, model.range(), 2, 8);
    const auto logits = run_step(model, cache, batch, tokens);
    if (first.empty()) first = logits;
    BOOST_TEST(same_bits(logits.data(), first.data(), first.size()), "threads " << threads);
  }
}

BOOST_AUTO_TEST_CASE(bad_rows_and_tokens_are_refused) {
  TinyModel m;
  ThreadPool pool(1);
  Transformer model(m.cfg, LayerRange{0, m.cfg.num_hidden_layers, true, true}, m.source, pool);
  KvCache cache(m.cfg, model.range(), 2, 4);
  std::vector<float> x(size_t(2 * m.cfg.hidden_size), 0.1f);
  const int32_t bad_token = int32_t(m.cfg.vocab_size);
  BOOST_CHECK_THROW(model.embed(&bad_token, 1, x.data()), InputError);
  BOOST_CHECK_THROW(model.forward(Batch{{{0, 4}}}, x.data(), cache), InputError);          // pos >= max_len
  BOOST_CHECK_THROW(model.forward(Batch{{{2, 0}}}, x.data(), cache), InputError);          // no slot 2
  BOOST_CHECK_THROW(model.forward(Batch{{{0, 1}, {0, 1}}}, x.data(), cache), InputError);  // pos repeats
  BOOST_CHECK_THROW(model.forward(Batch{{{1, 2}, {1, 0}}}, x.data(), cache), InputError);  // pos decreases
  BOOST_CHECK_NO_THROW(model.forward(Batch{}, x.data(), cache));                          // nothing to do
}

BOOST_AUTO_TEST_CASE(dump_hook_writes_intermediates) {
  const auto dir = std::filesystem::temp_directory_path() / ("trillion-dump-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  ::setenv("TRILLION_DUMP", dir.c_str(), 1);
  TinyModel m;
  ThreadPool pool(1);
  Transformer model(m.cfg, LayerRange{0, m.cfg.num_hidden_layers, true, true}, m.source, pool);
  ::unsetenv("TRILLION_DUMP");
  KvCache cache(m.cfg, model.range(), 1, 4);
  run_step(model, cache, rows_of(0, 0, 2), {3, 4});
  for (const char* f : {"step-00001/layer-000.attn_out.npy", "step-00001/layer-000.q.npy",
                        "step-00001/layer-001.router_ids.npy", "step-00001/layer-002.hidden.npy",
                        "step-00001/model.logits.npy"})
    BOOST_TEST(std::filesystem::exists(dir / f), f);
  std::filesystem::remove_all(dir);
}

// bench_model --phases: every phase of a step is timed, and timing changes
// no bit. (Counts, not clocks: how the phases' times add up against the
// step's is bench_model --phases' figure, not an assertion.)
BOOST_AUTO_TEST_CASE(phase_timer_sees_every_phase_and_changes_no_bit) {
  TinyModel m;
  BOOST_REQUIRE(m.cfg.first_k_dense_replace >= 1);  // a dense layer, then MoE layers
  BOOST_REQUIRE(m.cfg.num_hidden_layers > m.cfg.first_k_dense_replace);
  ThreadPool pool(2);
  Transformer model(m.cfg, LayerRange{0, m.cfg.num_hidden_layers, true, true}, m.source, pool);
  const auto tokens = random_tokens(3, 5, int(m.cfg.vocab_size));
  KvCache c1(m.cfg, model.range(), 1, 8);
  const auto plain = run_step(model, c1, rows_of(0, 0, 3), tokens);

  PhaseTimes times;
  model.time_phases(&times);
  KvCache c2(m.cfg, model.range(), 1, 8);
  const auto timed = run_step(model, c2, rows_of(0, 0, 3), tokens);
  BOOST_TEST(same_bits(timed.data(), plain.data(), plain.size()));
  for (int i = 0; i < int(Phase::count); ++i) BOOST_TEST(times.entered(Phase(i)) > 0, phase_name(Phase(i)));

  model.time_phases(nullptr);  // off again: a step adds nothing
  const PhaseTimes before = times;
  KvCache c3(m.cfg, model.range(), 1, 8);
  run_step(model, c3, rows_of(0, 0, 3), tokens);
  for (int i = 0; i < int(Phase::count); ++i) {
    BOOST_TEST(times.entered(Phase(i)) == before.entered(Phase(i)));
    BOOST_TEST(times.seconds(Phase(i)) == before.seconds(Phase(i)));
  }
}
