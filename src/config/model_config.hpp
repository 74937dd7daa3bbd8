// The model's hyper-parameters, read once from the Hugging Face config.json
// and passed by const& everywhere. Field names are the HF names; nothing is
// ever inferred from a dimension.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace trillion {

// How the checkpoint's linear weights are stored (its native precision).
enum class WeightFormat {
  bf16,       // every tensor bf16 (e_score_correction_bias may be f32)
  fp8_block,  // DeepSeek FP8: e4m3 weights + f32 weight_scale_inv per 128x128 block
  int4_group, // Kimi K2 Thinking: routed experts int4 pack-quantized, group 32, bf16 scales
  int8_group, // `trillion convert --quantize int8`: int8 q + bf16 scale per 32 input columns
};
const char* to_string(WeightFormat f);
WeightFormat weight_format_from_string(const std::string& s);  // throws ConfigError

struct RopeScaling {       // rope_scaling, type "yarn"
  std::string type;
  double factor = 1.0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double mscale = 1.0;
  double mscale_all_dim = 0.0;
  int64_t original_max_position_embeddings = 4096;
};

struct ModelConfig {
  std::string model_type;            // "deepseek_v3" | "kimi_k2"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;     // dense MLP width
  int64_t moe_intermediate_size = 0; // one routed expert's width
  int64_t num_hidden_layers = 0;
  int64_t num_nextn_predict_layers = 0;  // MTP layers stored after the main stack
  int64_t first_k_dense_replace = 0;
  int64_t moe_layer_freq = 1;
  int64_t num_attention_heads = 0;
  std::optional<int64_t> q_lora_rank;  // nullopt: q = Wq x
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  int64_t n_routed_experts = 0;
  int64_t n_shared_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t n_group = 1;
  int64_t topk_group = 1;
  bool norm_topk_prob = true;
  double routed_scaling_factor = 1.0;
  std::string scoring_func;          // "sigmoid"
  std::string topk_method;           // "noaux_tc"
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  std::optional<RopeScaling> rope_scaling;
  int64_t max_position_embeddings = 0;
  int64_t bos_token_id = -1;         // -1: none in config
  std::vector<int64_t> eos_token_ids;
  bool tie_word_embeddings = false;
  WeightFormat weight_format = WeightFormat::bf16;  // from quantization_config
  // Written by `trillion convert --quantize` (quantization_config.quant_method
  // "trillion", quantized_from "bf16", or "fp8" for int8): every linear layer
  // including lm_head is stored in weight_format (int4: those with
  // in_features % 32 == 0), not only the ones the native checkpoint of that
  // format quantizes.
  bool requantized = false;
  WeightFormat requantized_from = WeightFormat::bf16;  // bf16, or fp8_block (to int8 only)

  // Derived sizes (pure functions of the fields above).
  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  bool is_moe_layer(int64_t layer) const {
    return n_routed_experts > 0 && layer >= first_k_dense_replace && layer % moe_layer_freq == 0;
  }
  // Softmax scale of attention, including YaRN's mscale^2 correction.
  double softmax_scale() const;

  // Parses and validates; `source` names the file in error messages.
  static ModelConfig from_json(const nlohmann::json& j, const std::string& source);
  static ModelConfig from_file(const std::string& path);
};

// Why `convert --quantize` (and `plan --quantize`) cannot turn `cfg`'s
// checkpoint into `to`, or "" when it can: a bf16 checkpoint into int8, int4
// or fp8; a native fp8 one (DeepSeek-V3's) into int8, each weight's exact
// value (e4m3 code x block scale) quantized by the int8 rule.
std::string quantization_refused(const ModelConfig& cfg, WeightFormat to);
// The rule on formats alone (which source formats quantize to which), shared
// by quantization_refused and the parsers of configs and manifests that
// record a quantization already made.
std::string quantization_path_refused(WeightFormat from, WeightFormat to);

}  // namespace trillion
