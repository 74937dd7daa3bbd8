#define BOOST_TEST_MODULE model_config
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "config/model_config.hpp"

using namespace trillion;
using nlohmann::json;

namespace {
json load(const std::string& name) {
  std::ifstream in(std::string(TRILLION_FIXTURES) + "/configs/" + name);
  BOOST_REQUIRE(in);
  return json::parse(in);
}
std::string error_of(const json& j) {
  try {
    ModelConfig::from_json(j, "cfg.json");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

BOOST_AUTO_TEST_CASE(real_deepseek_v3_config) {
  ModelConfig c = ModelConfig::from_json(load("deepseek-v3.json"), "deepseek-v3.json");
  BOOST_TEST(c.hidden_size == 7168);
  BOOST_TEST(c.num_hidden_layers == 61);
  BOOST_TEST(*c.q_lora_rank == 1536);
  BOOST_TEST(c.n_group == 8);
  BOOST_CHECK(c.weight_format == WeightFormat::fp8_block);
  BOOST_TEST(!c.is_moe_layer(2));
  BOOST_TEST(c.is_moe_layer(3));
  BOOST_TEST(c.eos_token_ids == std::vector<int64_t>{1});
  // softmax scale = 192^-0.5 * (0.1 * 1.0 * ln 40 + 1)^2, by hand.
  const double m = 0.1 * std::log(40.0) + 1.0;
  BOOST_TEST(std::abs(c.softmax_scale() - m * m / std::sqrt(192.0)) < 1e-15);
}

BOOST_AUTO_TEST_CASE(real_kimi_k2_config) {
  ModelConfig c = ModelConfig::from_json(load("kimi-k2.json"), "kimi-k2.json");
  BOOST_TEST(c.n_routed_experts == 384);
  BOOST_TEST(c.n_group == 1);
  BOOST_TEST(c.model_type == "kimi_k2");
  BOOST_TEST(c.rope_theta == 50000.0);
}

BOOST_AUTO_TEST_CASE(missing_and_bad_fields_are_named) {
  json j = load("deepseek-v3.json");
  json a = j;
  a.erase("kv_lora_rank");
  BOOST_TEST(error_of(a).find("cfg.json: field 'kv_lora_rank' is missing") != std::string::npos);
  json b = j;
  b["hidden_size"] = "big";
  BOOST_TEST(error_of(b).find("'hidden_size' must be an integer") != std::string::npos);
  json c = j;
  c["scoring_func"] = "softmax";
  BOOST_TEST(error_of(c).find("scoring_func") != std::string::npos);
  json d = j;
  d["n_group"] = 7;
  BOOST_TEST(error_of(d).find("not divisible by n_group") != std::string::npos);
  json e = j;
  e["model_type"] = "llama";
  BOOST_TEST(error_of(e).find("not of the DeepSeek-V3 family") != std::string::npos);
  json f = j;
  f["quantization_config"]["weight_block_size"] = {64, 64};
  BOOST_TEST(error_of(f).find("weight_block_size") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(q_lora_null_and_eos_list) {
  json j = load("deepseek-v3.json");
  j["q_lora_rank"] = nullptr;
  j["eos_token_id"] = {1, 2};
  ModelConfig c = ModelConfig::from_json(j, "x");
  BOOST_TEST(!c.q_lora_rank.has_value());
  BOOST_TEST(c.eos_token_ids.size() == 2u);
}
