// YaRN inv_freq against tables computed by hand / numpy from the HF formulas;
// the rotation against float64.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <vector>

#include "model/rope.hpp"
#include "random_model.hpp"

using namespace trillion;

namespace {

ModelConfig config_with_rope(int64_t dim, double factor, int64_t orig, double mscale, double mscale_all_dim) {
  auto j = test::tiny_config_json();
  j["qk_rope_head_dim"] = dim;
  j["rope_scaling"]["factor"] = factor;
  j["rope_scaling"]["original_max_position_embeddings"] = orig;
  j["rope_scaling"]["mscale"] = mscale;
  j["rope_scaling"]["mscale_all_dim"] = mscale_all_dim;
  return ModelConfig::from_json(j, "test");
}

void check_table(const std::vector<double>& got, const std::vector<double>& want) {
  BOOST_TEST_REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i)
    BOOST_TEST(std::fabs(got[i] - want[i]) <= 4e-16 * want[i], "inv_freq[" << i << "] " << got[i] << " vs " << want[i]);
}

}  // namespace

// dim 8, base 1e4, factor 40, orig 64, beta 32/1: corr_dim(32) = 0.45 -> low 0,
// corr_dim(1) = 1.95 -> high 2; ramp = [0, .5, 1, 1];
// inv_freq = [1, .1*.5 + .0025*.5, .01/40, .001/40].
BOOST_AUTO_TEST_CASE(yarn_inv_freq_by_hand) {
  Rope rope(config_with_rope(8, 40.0, 64, 1.0, 1.0));
  check_table(rope.inv_freq(), {1.0, 0.05125, 0.00025, 2.5e-05});
  BOOST_TEST(rope.mscale() == 1.0);
}

// DeepSeek-V3's own rope config (dim 64, factor 40, orig 4096): low 10, high 23.
// Values from the HF formulas in numpy float64.
BOOST_AUTO_TEST_CASE(yarn_inv_freq_deepseek_v3) {
  Rope rope(config_with_rope(64, 40.0, 4096, 1.0, 1.0));
  check_table(rope.inv_freq(),
              {1.0, 0.7498942093324559, 0.5623413251903491, 0.4216965034285823, 0.31622776601683794,
               0.23713737056616555, 0.17782794100389226, 0.1333521432163324, 0.1, 0.07498942093324558,
               0.056234132519034905, 0.03900692656714386, 0.026879360111431223, 0.018378146218877827,
               0.01244795587027246, 0.008334508951020777, 0.0055, 0.0035619974943291656, 0.002249365300761396,
               0.0013705136361428923, 0.0007905694150420945, 0.00041499039849078964, 0.0001778279410038922,
               3.33380358040831e-05, 2.5e-05, 1.8747355233311396e-05, 1.4058533129758728e-05,
               1.0542412585714557e-05, 7.905694150420947e-06, 5.9284342641541385e-06, 4.445698525097307e-06,
               3.33380358040831e-06});
}

BOOST_AUTO_TEST_CASE(yarn_mscale_and_softmax_scale) {
  // mscale = get_mscale(40, m) / get_mscale(40, m_all): (0.1 ln 40 + 1) / 1 = 1.3688879454113936.
  BOOST_TEST(std::fabs(Rope(config_with_rope(64, 40.0, 4096, 1.0, 0.0)).mscale() - 1.3688879454113936) < 1e-15);
  BOOST_TEST(std::fabs(Rope(config_with_rope(64, 40.0, 4096, 0.707, 1.0)).mscale() - 0.9210423553163399) < 1e-15);
  // softmax scale of V3: 192^-0.5 * (0.1 ln 40 + 1)^2.
  auto j = test::tiny_config_json();
  j["qk_nope_head_dim"] = 128;
  j["qk_rope_head_dim"] = 64;
  const double want = std::pow(192.0, -0.5) * 1.3688879454113936 * 1.3688879454113936;
  BOOST_TEST(std::fabs(ModelConfig::from_json(j, "t").softmax_scale() - want) < 1e-15);
}

BOOST_AUTO_TEST_CASE(plain_rope_without_scaling) {
  auto j = test::tiny_config_json();
  j.erase("rope_scaling");
  Rope rope(ModelConfig::from_json(j, "t"));
  check_table(rope.inv_freq(), {1.0, 0.1, 0.01, 0.001});
  BOOST_TEST(rope.mscale() == 1.0);
}

BOOST_AUTO_TEST_CASE(rotation_of_adjacent_pairs) {
  const ModelConfig cfg = config_with_rope(8, 40.0, 64, 1.0, 0.0);  // mscale 1.3689: tables carry it
  Rope rope(cfg);
  const int64_t pos = 37;
  std::vector<float> cos(4), sin(4);
  rope.tables(pos, cos.data(), sin.data());
  std::vector<float> x = {0.3f, -1.2f, 0.7f, 0.25f, -0.9f, 0.4f, 1.5f, -0.6f}, y = x;
  rope.apply(y.data(), cos.data(), sin.data());
  for (int i = 0; i < 4; ++i) {
    const double a = pos * rope.inv_freq()[size_t(i)], m = rope.mscale();
    BOOST_TEST(std::fabs(cos[size_t(i)] - std::cos(a) * m) <= 1e-7 * m);
    BOOST_TEST(std::fabs(sin[size_t(i)] - std::sin(a) * m) <= 1e-7 * m);
    const double x0 = x[size_t(2 * i)], x1 = x[size_t(2 * i + 1)];
    const double want0 = (x0 * std::cos(a) - x1 * std::sin(a)) * m, want1 = (x1 * std::cos(a) + x0 * std::sin(a)) * m;
    BOOST_TEST(std::fabs(y[size_t(2 * i)] - want0) <= 1e-6 * (std::fabs(x0) + std::fabs(x1)) * m);
    BOOST_TEST(std::fabs(y[size_t(2 * i + 1)] - want1) <= 1e-6 * (std::fabs(x0) + std::fabs(x1)) * m);
  }
  // Position 0 with mscale 1 is the identity.
  Rope plain(config_with_rope(8, 40.0, 64, 1.0, 1.0));
  plain.tables(0, cos.data(), sin.data());
  y = x;
  plain.apply(y.data(), cos.data(), sin.data());
  BOOST_TEST(y == x, boost::test_tools::per_element());
}
