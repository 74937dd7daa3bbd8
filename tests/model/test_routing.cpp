// The router on hand-computed cases: group masking, bias vs combine weights,
// ties, normalization and scaling.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <vector>

#include "model/routing.hpp"
#include "random_model.hpp"

using namespace trillion;

namespace {

// 8 experts in 4 groups of 2, keep 2 groups, top-2, scaling 2.
ModelConfig router_config(int64_t n_group = 4, bool norm = true) {
  auto j = test::tiny_config_json();
  j["n_routed_experts"] = 8;
  j["n_group"] = n_group;
  j["topk_group"] = n_group > 1 ? 2 : 1;
  j["num_experts_per_tok"] = 2;
  j["routed_scaling_factor"] = 2.0;
  j["norm_topk_prob"] = norm;
  return ModelConfig::from_json(j, "router");
}

struct Choice {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

Choice route(const ModelConfig& cfg, const std::vector<float>& s, const std::vector<float>& bias) {
  Choice c{std::vector<int32_t>(2), std::vector<float>(2)};
  route_token(cfg, s.data(), VecView{DType::F32, bias.data(), int64_t(bias.size())}, c.ids.data(), c.weights.data());
  return c;
}

const std::vector<float> kNoBias(8, 0.0f);

}  // namespace

// Group scores (top-2 sums): g0 .9+0 = .9, g1 .5+.5 = 1, g2 .6+.45 = 1.05, g3 .2.
// Kept: g2, g1. Expert 0 (the best single score) is masked; among 2,3,4,5:
// 4 (.6), then 2 and 3 tie at .5 -> the lower index, 2.
BOOST_AUTO_TEST_CASE(group_masking_and_expert_ties) {
  const auto c = route(router_config(), {0.9f, 0.0f, 0.5f, 0.5f, 0.6f, 0.45f, 0.1f, 0.1f}, kNoBias);
  BOOST_TEST(c.ids == (std::vector<int32_t>{4, 2}), boost::test_tools::per_element());
  BOOST_TEST(c.weights[0] == 0.6f / (0.6f + 0.5f) * 2.0f);
  BOOST_TEST(c.weights[1] == 0.5f / (0.6f + 0.5f) * 2.0f);
}

// The bias decides the selection; the combine weights use the unbiased scores.
BOOST_AUTO_TEST_CASE(bias_selects_unbiased_weights) {
  const std::vector<float> s = {0.8f, 0.7f, 0.3f, 0.2f, 0.1f, 0.1f, 0.1f, 0.1f};
  std::vector<float> bias(8, 0.0f);
  BOOST_TEST(route(router_config(), s, bias).ids == (std::vector<int32_t>{0, 1}), boost::test_tools::per_element());
  bias[3] = 1.0f;  // biased: .8 .7 .4 1.2 .1 .1 .1 .1; groups g0 1.5, g1 1.6 kept
  bias[2] = 0.1f;
  const auto c = route(router_config(), s, bias);
  BOOST_TEST(c.ids == (std::vector<int32_t>{3, 0}), boost::test_tools::per_element());
  BOOST_TEST(c.weights[0] == 0.2f / (0.2f + 0.8f) * 2.0f);
  BOOST_TEST(c.weights[1] == 0.8f / (0.2f + 0.8f) * 2.0f);
}

// All equal: groups tie (keep g0, g1), experts tie (0, 1).
BOOST_AUTO_TEST_CASE(all_ties_go_to_lower_indices) {
  const auto c = route(router_config(), std::vector<float>(8, 0.5f), kNoBias);
  BOOST_TEST(c.ids == (std::vector<int32_t>{0, 1}), boost::test_tools::per_element());
  BOOST_TEST(c.weights[0] == 1.0f);
  BOOST_TEST(c.weights[1] == 1.0f);
}

// Group scores g0 .95, g1 .7, g2 .85, g3 .95: g0 and g3 kept. Expert 4 (.85)
// sits in a dropped group and is never chosen, though it beats expert 6 (.5).
BOOST_AUTO_TEST_CASE(masked_experts_never_chosen) {
  const auto c = route(router_config(), {0.95f, 0.0f, 0.6f, 0.1f, 0.85f, 0.0f, 0.5f, 0.45f}, kNoBias);
  BOOST_TEST(c.ids == (std::vector<int32_t>{0, 6}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(single_group_is_plain_top_k) {
  const auto c = route(router_config(1), {0.9f, 0.0f, 0.5f, 0.5f, 0.6f, 0.45f, 0.1f, 0.95f}, kNoBias);
  BOOST_TEST(c.ids == (std::vector<int32_t>{7, 0}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(without_normalization_weights_are_scaled_scores) {
  const auto c = route(router_config(4, false), {0.9f, 0.0f, 0.5f, 0.5f, 0.6f, 0.45f, 0.1f, 0.1f}, kNoBias);
  BOOST_TEST(c.ids == (std::vector<int32_t>{4, 2}), boost::test_tools::per_element());
  BOOST_TEST(c.weights[0] == 0.6f * 2.0f);
  BOOST_TEST(c.weights[1] == 0.5f * 2.0f);
}

BOOST_AUTO_TEST_CASE(nan_scores_rank_last) {
  const float nan = std::nanf("");
  const auto c = route(router_config(1), {nan, 0.2f, nan, 0.1f, 0.3f, nan, nan, nan}, kNoBias);
  BOOST_TEST(c.ids == (std::vector<int32_t>{4, 1}), boost::test_tools::per_element());
}
