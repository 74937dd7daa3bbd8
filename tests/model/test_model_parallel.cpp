// The seams the parallel runtime uses keep the bits: layers split over
// pipeline stages, routed experts split over owners, the shared expert
// computed by the experts' backend.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <utility>

#include "common/error.hpp"
#include "model/mlp.hpp"
#include "model_fixture.hpp"
#include "store/int8_source.hpp"

using namespace trillion;
using namespace trillion::test;

namespace {

// Experts split over two LocalExperts by id (as expert-parallel ranks hold
// them), each (token, k) sent alone: what an RMA backend may do.
class SplitExperts : public ExpertBackend {
 public:
  SplitExperts(const ModelConfig& cfg, TensorSource& src, ThreadPool& pool)
      : low_(cfg, LayerRange{0, cfg.num_hidden_layers}, src, pool, ExpertRange{0, cfg.n_routed_experts / 2}),
        high_(cfg, LayerRange{0, cfg.num_hidden_layers}, src, pool,
              ExpertRange{cfg.n_routed_experts / 2, cfg.n_routed_experts}) {}

  void run(const ExpertRequest& req) override {
    for (int64_t t = 0; t < req.n; ++t)
      for (int64_t k = 0; k < req.top_k; ++k) {
        const int32_t id = req.ids[t * req.top_k + k];
        LocalExperts& owner = low_.holds(req.layer, id) ? low_ : high_;
        owner.run(ExpertRequest{req.layer, 1, 1, req.hidden, req.x + t * req.hidden, &id,
                                req.out + (t * req.top_k + k) * req.hidden});
      }
  }

 private:
  LocalExperts low_, high_;
};

}  // namespace

BOOST_AUTO_TEST_CASE(pipeline_stages_match_one_stage) {
  TinyModel m({.format = "int4"});
  ThreadPool pool(2);
  const int64_t L = m.cfg.num_hidden_layers, d = m.cfg.hidden_size, V = m.cfg.vocab_size;
  Transformer whole(m.cfg, LayerRange{0, L, true, true}, m.source, pool);
  Transformer first(m.cfg, LayerRange{0, 1, true, false}, m.source, pool);
  Transformer last(m.cfg, LayerRange{1, L, false, true}, m.source, pool);
  KvCache cw(m.cfg, whole.range(), 2, 8), c1(m.cfg, first.range(), 2, 8), c2(m.cfg, last.range(), 2, 8);

  const std::vector<int32_t> tokens = {5, 9, 2, 77, 40};
  const Batch batch{{{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}}};
  const auto want = run_step(whole, cw, batch, tokens);

  std::vector<float> x(size_t(5 * d)), logits(size_t(5 * V));
  first.embed(tokens.data(), 5, x.data());
  first.forward(batch, x.data(), c1);  // activations [n, d] travel to the next stage
  last.forward(batch, x.data(), c2);
  last.logits(x.data(), 5, logits.data());
  BOOST_TEST(same_bits(logits.data(), want.data(), want.size()));
  BOOST_CHECK_THROW(first.logits(x.data(), 5, logits.data()), Error);
  BOOST_CHECK_THROW(last.embed(tokens.data(), 5, x.data()), Error);
}

BOOST_AUTO_TEST_CASE(split_experts_match_local_experts) {
  for (const char* format : {"bf16", "fp8", "int4"}) {
    BOOST_TEST_CONTEXT(format) {
      TinyModel m({.format = format});
      ThreadPool pool(2);
      const LayerRange all{0, m.cfg.num_hidden_layers, true, true};
      Transformer local(m.cfg, all, m.source, pool);
      SplitExperts split_backend(m.cfg, m.source, pool);
      Transformer split(m.cfg, all, m.source, pool, &split_backend);
      KvCache c1(m.cfg, all, 1, 8), c2(m.cfg, all, 1, 8);
      const std::vector<int32_t> tokens = {1, 2, 3, 50, 60, 70};
      const auto a = run_step(local, c1, rows_of(0, 0, 6), tokens);
      const auto b = run_step(split, c2, rows_of(0, 0, 6), tokens);
      BOOST_TEST(same_bits(a.data(), b.data(), a.size()));
    }
  }
}

BOOST_AUTO_TEST_CASE(local_experts_refuse_experts_they_do_not_hold) {
  TinyModel m;
  ThreadPool pool(1);
  LocalExperts low(m.cfg, LayerRange{0, m.cfg.num_hidden_layers}, m.source, pool, ExpertRange{0, 8});
  BOOST_TEST(low.holds(1, 7));
  BOOST_TEST(!low.holds(1, 8));
  BOOST_TEST(!low.holds(0, 1));  // layer 0 is dense
  std::vector<float> x(size_t(m.cfg.hidden_size)), out(size_t(m.cfg.hidden_size));
  const int32_t id = 9;
  BOOST_CHECK_THROW(low.run(ExpertRequest{1, 1, 1, m.cfg.hidden_size, x.data(), &id, out.data()}), Error);
}

// An offered shared expert: LocalExperts runs it with the routed experts
// where they run one per thread, with mlp_forward's bits on both compute
// paths and any thread count; it declines (and leaves shared_out alone)
// with fewer experts than threads, or when the shared expert alone is more
// than a thread's share of the work.
BOOST_AUTO_TEST_CASE(local_experts_run_an_offered_shared_expert_with_mlp_forwards_bits) {
  // (In the int4 model, as in Kimi's checkpoints, the shared expert is BF16.
  // "int8" is the fp8 model as its integer path reads it: INT8 experts, and
  // the shared expert reuses the routed experts' quantized rows.)
  for (const std::string format : {"bf16", "fp8", "int4", "int8"}) {
    TinyModel m({.format = format == "int8" ? "fp8" : format});
    Int8FromFp8Source int8(m.source, nullptr);
    TensorSource& source = format == "int8" ? static_cast<TensorSource&>(int8) : m.source;
    const int64_t d = m.cfg.hidden_size, k = m.cfg.num_experts_per_tok, E = m.cfg.n_routed_experts;
    const LayerRange all{0, m.cfg.num_hidden_layers};
    const ModelWeights w = ModelWeights::load(m.cfg, all, source);
    const MlpWeights& shared = w.layers[1].moe.shared;
    for (Activations act : {Activations::f32, Activations::int8, Activations::bf16})
      for (int threads : {1, 2, 3}) {
        if (act == Activations::bf16 && format != "fp8") continue;  // f32's bits elsewhere
        ThreadPool pool(threads);
        LocalExperts experts(m.cfg, all, source, pool, act);
        // top_k experts per token (one group each at n = 1), then one expert
        // per token among 3 (3 groups: with 3 threads the shared expert, 9
        // units, is more than a third of the 20).
        for (const auto& [n, per_token] : {std::pair<int64_t, int64_t>{1, k}, {5, k}, {1, 1}, {8, 1}}) {
          BOOST_TEST_CONTEXT(format << " " << to_string(act) << " threads " << threads << " n " << n << " top "
                                    << per_token) {
            std::mt19937 rng(uint32_t(n * 10 + per_token));
            std::uniform_real_distribution<float> u(-1.0f, 1.0f);
            std::vector<float> x(size_t(n * d));
            for (float& v : x) v = u(rng);
            std::vector<int32_t> ids(size_t(n * per_token));
            for (int64_t t = 0; t < n; ++t)
              for (int64_t j = 0; j < per_token; ++j)  // distinct within a token
                ids[size_t(t * per_token + j)] = per_token == 1 ? int32_t(t % 3) : int32_t((3 * t + 5 * j) % E);
            std::vector<float> routed(size_t(n * per_token * d)), out(size_t(n * d), -7.0f), want(out.size());
            bool done = false;
            ExpertRequest req{1, n, per_token, d, x.data(), ids.data(), routed.data()};
            req.shared = &shared, req.shared_out = out.data(), req.shared_done = &done;
            experts.run(req);
            const int64_t groups = int64_t(std::set<int32_t>(ids.begin(), ids.end()).size());
            const bool expect = groups >= threads && !(per_token == 1 && n == 8 && threads == 3);
            BOOST_TEST(done == expect);
            if (done) {
              mlp_forward(shared, x.data(), n, want.data(), act, pool);
              BOOST_TEST(same_bits(out.data(), want.data(), want.size()));
            } else {
              BOOST_TEST(std::all_of(out.begin(), out.end(), [](float v) { return v == -7.0f; }));
            }
          }
        }
      }
  }
}
