// The head's guard against garbage: a row whose logits are not all finite
// gets token -1 (its request then fails, tests/scheduler/test_containment),
// and the other rows of the step are chosen exactly as without it.
#define BOOST_TEST_MODULE head_step
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <limits>
#include <random>

#include "common/thread_pool.hpp"
#include "model_fixture.hpp"
#include "parallel/head_step.hpp"

using namespace trillion;

BOOST_AUTO_TEST_CASE(non_finite_rows_get_token_minus_one) {
  test::TinyModel m;
  ThreadPool pool(1);
  Transformer model(m.cfg, LayerRange{0, m.cfg.num_hidden_layers, true, true}, m.source, pool);
  const int64_t d = m.cfg.hidden_size, rows = 3;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(size_t(rows * d));
  for (float& v : x) v = u(rng);
  StepInput in;
  in.logit_rows = {0, 1, 2};
  in.sampling.resize(3);
  in.sampling[2].logprobs = 1;
  const StepOutput clean = head_step(model, x.data(), in);
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    std::vector<float> y = x;
    y[size_t(d + 5)] = bad;  // row 1
    const StepOutput out = head_step(model, y.data(), in);
    BOOST_REQUIRE_EQUAL(out.tokens.size(), 3u);
    BOOST_TEST(out.tokens[1] == -1);
    BOOST_TEST(clean.tokens[1] >= 0);
    BOOST_TEST(out.tokens[0] == clean.tokens[0]);
    BOOST_TEST(out.tokens[2] == clean.tokens[2]);
    BOOST_TEST(out.logprobs[2] == clean.logprobs[2]);
    BOOST_TEST(std::isfinite(clean.logprobs[2]));
  }
}
