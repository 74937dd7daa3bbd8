// The expected-tensor table against docs/checkpoint.md, on the real
// DeepSeek-V3 and Kimi K2 (Thinking) shapes.
#define BOOST_TEST_MODULE hf_tensors
#include <boost/test/unit_test.hpp>

#include <map>

#include "common/error.hpp"
#include "format/hf_tensors.hpp"
#include "store/inspect.hpp"
#include "store/shard_layout.hpp"
#include "synthetic_hf.hpp"

using namespace trillion;

namespace {

// The fields of DeepSeek-V3's config.json that matter here (profiles/models/deepseek-v3.json).
nlohmann::json deepseek_v3() {
  return {{"model_type", "deepseek_v3"}, {"vocab_size", 129280}, {"hidden_size", 7168},
          {"intermediate_size", 18432}, {"moe_intermediate_size", 2048}, {"num_hidden_layers", 61},
          {"num_nextn_predict_layers", 1}, {"first_k_dense_replace", 3}, {"moe_layer_freq", 1},
          {"num_attention_heads", 128}, {"q_lora_rank", 1536}, {"kv_lora_rank", 512},
          {"qk_nope_head_dim", 128}, {"qk_rope_head_dim", 64}, {"v_head_dim", 128},
          {"n_routed_experts", 256}, {"n_shared_experts", 1}, {"num_experts_per_tok", 8},
          {"n_group", 8}, {"topk_group", 4}, {"norm_topk_prob", true}, {"routed_scaling_factor", 2.5},
          {"scoring_func", "sigmoid"}, {"topk_method", "noaux_tc"}, {"rms_norm_eps", 1e-6},
          {"rope_theta", 10000}, {"max_position_embeddings", 163840}, {"bos_token_id", 0},
          {"eos_token_id", 1}, {"tie_word_embeddings", false},
          {"quantization_config",
           {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"},
            {"weight_block_size", {128, 128}}}}};
}

// Kimi K2 Thinking: Kimi K2's config with the compressed-tensors block.
nlohmann::json kimi_k2_thinking() {
  nlohmann::json c = deepseek_v3();
  c["model_type"] = "kimi_k2";
  c["vocab_size"] = 163840;
  c["first_k_dense_replace"] = 1;
  c["num_nextn_predict_layers"] = 0;
  c["num_attention_heads"] = 64;
  c["n_routed_experts"] = 384;
  c["n_group"] = 1;
  c["topk_group"] = 1;
  c["bos_token_id"] = 163584;
  c["eos_token_id"] = 163585;
  c["quantization_config"] = trillion::test::tiny_config("int4")["quantization_config"];
  return c;
}

std::map<std::string, ExpectedTensor> by_name(const std::vector<ExpectedTensor>& v) {
  std::map<std::string, ExpectedTensor> m;
  for (const auto& e : v) m.emplace(e.name, e);
  return m;
}

void check(const std::map<std::string, ExpectedTensor>& m, const std::string& name, std::vector<int64_t> shape,
           DType dtype) {
  BOOST_TEST_CONTEXT(name) {
    auto it = m.find(name);
    BOOST_REQUIRE(it != m.end());
    BOOST_TEST(it->second.shape == shape);
    BOOST_TEST(std::string(dtype_name(it->second.dtypes.front())) == dtype_name(dtype));
  }
}

// A manifest listing the table (no files): enough to count parameters.
Manifest manifest_of(const ModelConfig& cfg, const std::vector<ExpectedTensor>& table) {
  Manifest m;
  m.weight_format = cfg.weight_format;
  std::map<std::string, bool> seen;
  for (const ExpectedTensor& e : table) {
    if (e.attribute_only) continue;
    ShardKey k = shard_for(e.role, e.layer, e.expert, cfg, 32);
    if (!seen[k.file]) m.add_shard(ShardInfo{k.file, 0, k.role, k.layer, k.expert_first, k.expert_last, std::nullopt});
    seen[k.file] = true;
    TensorInfo t{e.name, k.file, e.dtypes.front(), e.shape, 0, 0, 0, {}};
    if (e.name.ends_with(".weight_packed")) t.weight_shape = {e.shape[0], e.shape[1] * 8};
    m.add_tensor(t);
  }
  return m;
}

}  // namespace

BOOST_AUTO_TEST_CASE(deepseek_v3_fp8) {
  const ModelConfig cfg = ModelConfig::from_json(deepseek_v3(), "dsv3");
  const auto table = expected_hf_tensors(cfg);
  // Per dense layer: 2 norms + q_a (2) + q_a norm + q_b (2) + kv_a (2) + kv_a norm + kv_b (2) + o (2) + 3 MLP x 2 = 20;
  // per MoE layer: the same 14 of attention + gate + bias + 3 shared x 2 + 256 experts x 3 x 2 = 1558.
  BOOST_TEST(table.size() == 1u + 3 * 20 + 58 * 1558 + 2);
  const auto m = by_name(table);
  check(m, "model.embed_tokens.weight", {129280, 7168}, DType::BF16);
  check(m, "lm_head.weight", {129280, 7168}, DType::BF16);
  check(m, "model.norm.weight", {7168}, DType::BF16);
  check(m, "model.layers.0.self_attn.q_a_proj.weight", {1536, 7168}, DType::F8_E4M3);
  check(m, "model.layers.0.self_attn.q_a_proj.weight_scale_inv", {12, 56}, DType::F32);
  check(m, "model.layers.0.self_attn.q_b_proj.weight", {24576, 1536}, DType::F8_E4M3);
  check(m, "model.layers.0.self_attn.kv_a_proj_with_mqa.weight", {576, 7168}, DType::F8_E4M3);
  check(m, "model.layers.0.self_attn.kv_a_proj_with_mqa.weight_scale_inv", {5, 56}, DType::F32);  // 576/128 -> 5
  check(m, "model.layers.0.self_attn.kv_a_layernorm.weight", {512}, DType::BF16);
  check(m, "model.layers.0.self_attn.kv_b_proj.weight", {32768, 512}, DType::F8_E4M3);
  check(m, "model.layers.0.self_attn.o_proj.weight", {7168, 16384}, DType::F8_E4M3);
  check(m, "model.layers.2.mlp.down_proj.weight", {7168, 18432}, DType::F8_E4M3);
  check(m, "model.layers.2.mlp.down_proj.weight_scale_inv", {56, 144}, DType::F32);
  check(m, "model.layers.3.mlp.gate.weight", {256, 7168}, DType::BF16);
  check(m, "model.layers.3.mlp.gate.e_score_correction_bias", {256}, DType::F32);
  check(m, "model.layers.3.mlp.shared_experts.up_proj.weight", {2048, 7168}, DType::F8_E4M3);
  check(m, "model.layers.60.mlp.experts.255.down_proj.weight", {7168, 2048}, DType::F8_E4M3);
  check(m, "model.layers.60.mlp.experts.255.down_proj.weight_scale_inv", {56, 16}, DType::F32);
  BOOST_TEST(!m.count("model.layers.2.mlp.gate.weight"));  // dense
  BOOST_TEST(!m.count("model.layers.61.input_layernorm.weight"));  // MTP: not in the table

  const auto& e = m.at("model.layers.60.mlp.experts.255.down_proj.weight");
  BOOST_TEST((e.role == TensorRole::experts && e.layer == 60 && e.expert == 255));
  BOOST_TEST((m.at("model.layers.3.mlp.gate.weight").role == TensorRole::layer));
  BOOST_TEST((m.at("lm_head.weight").role == TensorRole::head));

  // "671B total, 37B activated" (DeepSeek-V3 report; its 37B includes the embedding's share).
  const ParameterCounts p = count_parameters(manifest_of(cfg, table), cfg);
  BOOST_TEST_MESSAGE("DeepSeek-V3: " << p.total << " total, " << p.active << " active");
  BOOST_TEST(p.total > 670.0e9);
  BOOST_TEST(p.total < 672.0e9);
  BOOST_TEST(p.active > 36.0e9);
  BOOST_TEST(p.active < 38.0e9);
}

BOOST_AUTO_TEST_CASE(kimi_k2_thinking_int4) {
  const ModelConfig cfg = ModelConfig::from_json(kimi_k2_thinking(), "kimi");
  const auto m = by_name(expected_hf_tensors(cfg));
  check(m, "model.layers.0.mlp.gate_proj.weight", {18432, 7168}, DType::BF16);  // dense: not quantized
  check(m, "model.layers.1.self_attn.q_b_proj.weight", {12288, 1536}, DType::BF16);
  check(m, "model.layers.1.mlp.shared_experts.down_proj.weight", {7168, 2048}, DType::BF16);
  check(m, "model.layers.1.mlp.experts.383.gate_proj.weight_packed", {2048, 896}, DType::I32);
  check(m, "model.layers.1.mlp.experts.383.gate_proj.weight_scale", {2048, 224}, DType::BF16);
  check(m, "model.layers.1.mlp.experts.383.down_proj.weight_packed", {7168, 256}, DType::I32);
  check(m, "model.layers.1.mlp.experts.383.down_proj.weight_scale", {7168, 64}, DType::BF16);
  check(m, "model.layers.1.mlp.experts.383.down_proj.weight_shape", {2}, DType::I32);
  BOOST_TEST(m.at("model.layers.1.mlp.experts.383.down_proj.weight_shape").attribute_only);
  BOOST_TEST(!m.count("model.layers.1.mlp.experts.0.gate_proj.weight"));

  // "1T total, 32B activated" (Kimi K2 model card; 32B includes the embedding share).
  const ParameterCounts p = count_parameters(manifest_of(cfg, expected_hf_tensors(cfg)), cfg);
  BOOST_TEST_MESSAGE("Kimi K2: " << p.total << " total, " << p.active << " active");
  BOOST_TEST(p.total > 1.02e12);
  BOOST_TEST(p.total < 1.05e12);
  BOOST_TEST(p.active > 31.0e9);
  BOOST_TEST(p.active < 33.5e9);
}

BOOST_AUTO_TEST_CASE(int4_needs_widths_divisible_by_32) {
  auto c = trillion::test::tiny_config("int4");
  c["moe_intermediate_size"] = 48;  // down_proj input 48: not a whole number of groups
  const ModelConfig cfg = ModelConfig::from_json(c, "c");
  BOOST_CHECK_THROW(expected_hf_tensors(cfg), ConfigError);
}

BOOST_AUTO_TEST_CASE(no_q_lora) {
  auto c = trillion::test::tiny_config("bf16");
  c["q_lora_rank"] = nullptr;
  const auto m = by_name(expected_hf_tensors(ModelConfig::from_json(c, "c")));
  check(m, "model.layers.0.self_attn.q_proj.weight", {2 * 24, 64}, DType::BF16);
  BOOST_TEST(!m.count("model.layers.0.self_attn.q_a_proj.weight"));
}

BOOST_AUTO_TEST_CASE(name_parsing) {
  BOOST_TEST(parse_hf_name("model.layers.7.mlp.experts.40.gate_proj.weight").layer == 7);
  BOOST_TEST(parse_hf_name("model.layers.7.mlp.experts.40.gate_proj.weight").expert == 40);
  BOOST_TEST(parse_hf_name("model.layers.61.enorm.weight").layer == 61);
  BOOST_TEST(parse_hf_name("model.layers.61.enorm.weight").expert == -1);
  BOOST_TEST(parse_hf_name("model.norm.weight").layer == -1);
  BOOST_TEST(parse_hf_name("model.layers.x.norm").layer == -1);
  BOOST_TEST(packed_name_for_shape("a.weight_shape") == "a.weight_packed");
  BOOST_TEST(packed_name_for_shape("a.weight") == "");
}

// The weights' table is what the expected tensors expand: on bf16 every
// weight is one tensor, a matrix's name plus ".weight", in the same order.
BOOST_AUTO_TEST_CASE(weights_table_is_the_expected_tensors) {
  const ModelConfig cfg = ModelConfig::from_json(trillion::test::tiny_config("bf16"), "c");
  std::vector<WeightSpec> weights{embed_weight(cfg)};
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
    for (const WeightSpec& w : layer_weights(cfg, l)) weights.push_back(w);
    if (cfg.is_moe_layer(l))
      for (int64_t e = 0; e < cfg.n_routed_experts; ++e)
        for (const WeightSpec& w : expert_weights(cfg, l, e)) weights.push_back(w);
  }
  for (const WeightSpec& w : head_weights(cfg)) weights.push_back(w);
  const std::vector<ExpectedTensor> expected = expected_hf_tensors(cfg);
  BOOST_TEST_REQUIRE(weights.size() == expected.size());
  for (size_t i = 0; i < weights.size(); ++i) {
    const WeightSpec& w = weights[i];
    BOOST_TEST_CONTEXT(expected[i].name) {
      BOOST_TEST(w.name + (w.is_matrix() ? ".weight" : "") == expected[i].name);
      BOOST_TEST((expected[i].shape == (w.is_matrix() ? std::vector<int64_t>{w.out, w.in} : std::vector<int64_t>{w.out})));
      BOOST_TEST((w.linear == expected[i].linear));
    }
  }
  BOOST_TEST(hf_name(Weight::kv_b, 3) == "model.layers.3.self_attn.kv_b_proj");
  BOOST_TEST(hf_name(Weight::expert_down, 3, 40) == "model.layers.3.mlp.experts.40.down_proj");
  BOOST_TEST(hf_name(Weight::lm_head) == "lm_head");
  const std::vector<WeightSpec> mtp = mtp_weights(cfg);
  BOOST_TEST(mtp.at(4).name == "model.layers." + std::to_string(cfg.num_hidden_layers) + ".eh_proj");
  BOOST_TEST((mtp.at(4).weight == Weight::mtp_eh_proj && mtp.at(4).in == 2 * cfg.hidden_size));
}

BOOST_AUTO_TEST_CASE(shard_names) {
  ModelConfig cfg = ModelConfig::from_json(deepseek_v3(), "dsv3");
  BOOST_TEST(shard_for(TensorRole::embed, -1, -1, cfg, 32).file == "embed.h5");
  BOOST_TEST(shard_for(TensorRole::head, -1, -1, cfg, 32).file == "head.h5");
  BOOST_TEST(shard_for(TensorRole::layer, 7, -1, cfg, 32).file == "layer-007.h5");
  const ShardKey k = shard_for(TensorRole::experts, 7, 40, cfg, 32);
  BOOST_TEST(k.file == "layer-007-experts-032-063.h5");
  BOOST_TEST((k.expert_first == 32 && k.expert_last == 63));
  BOOST_TEST(shard_for(TensorRole::experts, 7, 255, cfg, 100).file == "layer-007-experts-200-255.h5");
  BOOST_TEST(shard_for(TensorRole::mtp_experts, 61, 3, cfg, 32).file == "mtp-061-experts-000-031.h5");
  BOOST_TEST(shard_for(TensorRole::mtp, 61, -1, cfg, 32).file == "mtp-061.h5");
  cfg.n_routed_experts = 1024;
  BOOST_TEST(shard_for(TensorRole::experts, 7, 1000, cfg, 32).file == "layer-007-experts-0992-1023.h5");
  BOOST_CHECK_THROW(shard_for(TensorRole::experts, 7, 1, cfg, 0), ConfigError);
}

// convert --quantize: config.json's trillion quantization_config makes every
// linear layer and lm_head quantized, with the roles the error report uses.
BOOST_AUTO_TEST_CASE(requantized_tables) {
  nlohmann::json c = deepseek_v3();
  c["quantization_config"] = {{"quant_method", "trillion"}, {"weight_format", "int8"}, {"quantized_from", "bf16"},
                              {"group_size", 32}};
  ModelConfig cfg = ModelConfig::from_json(c, "config.json");
  BOOST_TEST(cfg.requantized);
  BOOST_TEST((cfg.weight_format == WeightFormat::int8_group));
  auto m = by_name(expected_hf_tensors(cfg));
  check(m, "lm_head.weight", {129280, 7168}, DType::I8);
  check(m, "lm_head.weight_scale", {129280, 224}, DType::BF16);
  check(m, "model.layers.0.self_attn.kv_a_proj_with_mqa.weight", {576, 7168}, DType::I8);
  check(m, "model.layers.0.self_attn.kv_a_proj_with_mqa.weight_scale", {576, 224}, DType::BF16);
  check(m, "model.layers.5.mlp.experts.7.down_proj.weight_scale", {7168, 64}, DType::BF16);
  check(m, "model.embed_tokens.weight", {129280, 7168}, DType::BF16);
  check(m, "model.layers.5.mlp.gate.weight", {256, 7168}, DType::BF16);
  BOOST_TEST(to_string(m.at("lm_head.weight").linear) == std::string("lm_head"));
  BOOST_TEST(to_string(m.at("lm_head.weight_scale").linear) == std::string("lm_head"));
  BOOST_TEST(to_string(m.at("model.layers.0.mlp.up_proj.weight").linear) == std::string("dense_mlp"));
  BOOST_TEST(to_string(m.at("model.layers.5.mlp.shared_experts.up_proj.weight").linear) ==
             std::string("shared_experts"));
  BOOST_TEST(to_string(m.at("model.layers.5.mlp.experts.7.up_proj.weight").linear) == std::string("routed_experts"));
  BOOST_TEST(to_string(m.at("model.layers.5.self_attn.o_proj.weight").linear) == std::string("attention"));
  BOOST_TEST(to_string(m.at("model.layers.5.mlp.gate.weight").linear) == std::string("none"));
  BOOST_TEST(to_string(m.at("model.embed_tokens.weight").linear) == std::string("none"));
  c["quantization_config"]["quantized_from"] = "fp8";  // convert --quantize int8 of DeepSeek-V3's own weights
  BOOST_TEST((ModelConfig::from_json(c, "config.json").requantized_from == WeightFormat::fp8_block));
  BOOST_TEST(expected_hf_tensors(ModelConfig::from_json(c, "config.json")).size() == expected_hf_tensors(cfg).size());
  c["quantization_config"]["quantized_from"] = "bf16";

  c["quantization_config"]["weight_format"] = "int4";
  m = by_name(expected_hf_tensors(ModelConfig::from_json(c, "config.json")));
  check(m, "lm_head.weight_packed", {129280, 896}, DType::I32);
  check(m, "model.layers.0.self_attn.q_b_proj.weight_packed", {128 * 192, 1536 / 8}, DType::I32);
  check(m, "model.layers.0.mlp.down_proj.weight_scale", {7168, 18432 / 32}, DType::BF16);
  c["quantization_config"]["weight_format"] = "fp8";
  m = by_name(expected_hf_tensors(ModelConfig::from_json(c, "config.json")));
  check(m, "lm_head.weight", {129280, 7168}, DType::F8_E4M3);
  check(m, "lm_head.weight_scale_inv", {1010, 56}, DType::F32);
  // A requantized int4 table keeps a matrix with in % 32 != 0 BF16 (a native one throws).
  c["v_head_dim"] = 100;  // o_proj in = 128 * 100, a multiple of 32
  c["quantization_config"]["weight_format"] = "int4";
  m = by_name(expected_hf_tensors(ModelConfig::from_json(c, "config.json")));
  check(m, "model.layers.0.self_attn.o_proj.weight_packed", {7168, 128 * 100 / 8}, DType::I32);
  c["num_attention_heads"] = 1;  // o_proj in = 100
  c["n_routed_experts"] = 8;
  c["n_group"] = 1;
  c["topk_group"] = 1;
  m = by_name(expected_hf_tensors(ModelConfig::from_json(c, "config.json")));
  check(m, "model.layers.0.self_attn.o_proj.weight", {7168, 100}, DType::BF16);
  // Bad blocks are config errors naming the field.
  for (auto [key, value] : {std::pair<std::string, std::string>{"quantized_from", "fp8"},  // fp8 goes to int8 only
                            {"quantized_from", "int8"},
                            {"weight_format", "int2"}}) {
    nlohmann::json bad = c;
    bad["quantization_config"][key] = value;
    BOOST_CHECK_EXCEPTION(ModelConfig::from_json(bad, "config.json"), ConfigError, [&](const ConfigError& e) {
      return std::string(e.what()).find(key) != std::string::npos;
    });
  }
}
