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

// Issue 10 item 2: every size has an upper bound and the fields agree, so no
// product of them overflows and a typo is named here, not met as an
// allocation later.
BOOST_AUTO_TEST_CASE(sizes_are_bounded_and_consistent) {
  const json j = load("deepseek-v3.json");
  auto with = [&](const std::string& key, const json& v) {
    json c = j;
    c[key] = v;
    return error_of(c);
  };
  auto has = [](const std::string& msg, const std::string& part) {
    BOOST_TEST_INFO(msg);
    BOOST_TEST(msg.find(part) != std::string::npos);
  };
  has(with("num_hidden_layers", 1000000000), "cfg.json: field 'num_hidden_layers' must be <= 65536, got 1000000000");
  has(with("hidden_size", int64_t(1) << 40), "'hidden_size' must be <= 1048576");
  has(with("moe_intermediate_size", int64_t(1) << 30), "'moe_intermediate_size' must be <= 1048576");
  has(with("kv_lora_rank", int64_t(1) << 30), "'kv_lora_rank' must be <= 1048576");
  has(with("q_lora_rank", int64_t(1) << 30), "'q_lora_rank' must be <= 1048576");
  has(with("v_head_dim", int64_t(1) << 30), "'v_head_dim' must be <= 1048576");
  has(with("num_attention_heads", 100000), "'num_attention_heads' must be <= 65536");
  has(with("n_routed_experts", 1 << 20), "'n_routed_experts' must be <= 65536");
  has(with("vocab_size", int64_t(1) << 40), "'vocab_size' must be <= 16777216");
  has(with("max_position_embeddings", int64_t(1) << 40), "'max_position_embeddings' must be <= 2147483647");
  // Above INT64_MAX: nlohmann keeps it unsigned; it must not wrap to a negative.
  has(with("hidden_size", json::parse("18446744073709551615")), "'hidden_size' must be an integer");
  has(with("rms_norm_eps", 0.0), "'rms_norm_eps' must be a finite number > 0");
  has(with("rope_theta", -1.0), "'rope_theta' must be a finite number > 0");
  has(with("bos_token_id", 129280), "'bos_token_id' is outside the vocabulary");
  has(with("eos_token_id", json::array({1, "two"})), "'eos_token_id' must hold integers");
  json r = j;
  r["rope_scaling"]["factor"] = 0.0;
  has(error_of(r), "'factor' must be a finite number >= 1");
  r = j;  // a context set below the pre-training one is allowed (it only limits --max-len)
  r["rope_scaling"]["original_max_position_embeddings"] = 1 << 20;
  BOOST_TEST(error_of(r) == "no error");
  r["rope_scaling"]["original_max_position_embeddings"] = int64_t(1) << 40;
  has(error_of(r), "'original_max_position_embeddings' must be <= 2147483647");
  // Cross-field checks that already existed stay.
  has(with("num_experts_per_tok", 300), "'num_experts_per_tok' exceeds the experts in the kept groups");
  has(with("topk_group", 9), "'topk_group' exceeds n_group");
  has(with("first_k_dense_replace", 62), "'first_k_dense_replace' exceeds num_hidden_layers");
}
