#include "random_model.hpp"

#include <cmath>
#include <random>
#include <vector>

#include "common/numeric.hpp"

namespace trillion::test {
namespace {

using nlohmann::json;

// Nearest e4m3fn code of v (|v| <= 448), by search over the finite codes.
uint8_t to_e4m3(float v) {
  uint8_t best = 0;
  float best_err = INFINITY;
  for (int code = 0; code < 0x7f; ++code) {
    const float err = std::fabs(std::fabs(v) - fp8e4m3_to_f32(uint8_t(code)));
    if (err < best_err) best_err = err, best = uint8_t(code);
  }
  return uint8_t(best | (v < 0 ? 0x80 : 0));
}

class Filler {
 public:
  Filler(const ModelConfig& cfg, MemoryTensorSource& src, uint64_t seed) : cfg_(cfg), src_(src), rng_(seed) {}

  std::vector<float> uniform(int64_t n, float lo, float hi) {
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& f : v) f = u(rng_);
    return v;
  }

  void bf16(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& v) {
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = f32_to_bf16(v[i]);
    src_.add(name, DType::BF16, std::move(shape), h.data());
  }

  void norm(const std::string& name, int64_t n) { bf16(name, {n}, uniform(n, 0.8f, 1.2f)); }

  // A linear layer [rows, cols] with unit-variance outputs for unit inputs,
  // stored as `kind` demands in this checkpoint format.
  void linear(const std::string& prefix, int64_t rows, int64_t cols, bool expert) {
    const float a = std::sqrt(3.0f / float(cols));
    const std::vector<float> w = uniform(rows * cols, -a, a);
    if (cfg_.weight_format == WeightFormat::fp8_block) return fp8(prefix, rows, cols, w);
    if (cfg_.weight_format == WeightFormat::int4_group && expert) return int4(prefix, rows, cols, w);
    bf16(prefix + ".weight", {rows, cols}, w);
  }

  void fp8(const std::string& prefix, int64_t rows, int64_t cols, const std::vector<float>& w) {
    const int64_t sr = (rows + 127) / 128, sc = (cols + 127) / 128;
    std::vector<float> scale(size_t(sr * sc), 0.0f);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        float& s = scale[size_t((r / 128) * sc + c / 128)];
        s = std::max(s, std::fabs(w[size_t(r * cols + c)]) / 448.0f);
      }
    std::vector<uint8_t> q(w.size());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const float s = scale[size_t((r / 128) * sc + c / 128)];
        q[size_t(r * cols + c)] = to_e4m3(s > 0 ? w[size_t(r * cols + c)] / s : 0.0f);
      }
    src_.add(prefix + ".weight", DType::F8_E4M3, {rows, cols}, q.data());
    src_.add(prefix + ".weight_scale_inv", DType::F32, {sr, sc}, scale.data());
  }

  void int4(const std::string& prefix, int64_t rows, int64_t cols, const std::vector<float>& w) {
    std::vector<uint32_t> packed(size_t(rows * cols / 8), 0);
    std::vector<uint16_t> scale(size_t(rows * cols / 32));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t g = 0; g < cols / 32; ++g) {
        float mx = 0;
        for (int64_t c = g * 32; c < g * 32 + 32; ++c) mx = std::max(mx, std::fabs(w[size_t(r * cols + c)]));
        const uint16_t sb = f32_to_bf16(mx / 7.0f);
        scale[size_t(r * (cols / 32) + g)] = sb;
        const float s = bf16_to_f32(sb);
        for (int64_t c = g * 32; c < g * 32 + 32; ++c) {
          const int q = int(std::clamp(std::nearbyint(s > 0 ? w[size_t(r * cols + c)] / s : 0.0f), -8.0f, 7.0f));
          packed[size_t((r * cols + c) / 8)] |= uint32_t(q + 8) << (4 * (c % 8));
        }
      }
    src_.add(prefix + ".weight_packed", DType::I32, {rows, cols / 8}, packed.data());
    src_.add(prefix + ".weight_scale", DType::BF16, {rows, cols / 32}, scale.data());
    const int32_t shape[2] = {int32_t(rows), int32_t(cols)};
    src_.add(prefix + ".weight_shape", DType::I32, {2}, shape);
  }

  void mlp(const std::string& p, int64_t width, bool expert) {
    linear(p + "gate_proj", width, cfg_.hidden_size, expert);
    linear(p + "up_proj", width, cfg_.hidden_size, expert);
    linear(p + "down_proj", cfg_.hidden_size, width, expert);
  }

  void model() {
    const int64_t d = cfg_.hidden_size, H = cfg_.num_attention_heads;
    bf16("model.embed_tokens.weight", {cfg_.vocab_size, d}, uniform(cfg_.vocab_size * d, -1.0f, 1.0f));
    norm("model.norm.weight", d);
    bf16("lm_head.weight", {cfg_.vocab_size, d}, uniform(cfg_.vocab_size * d, -0.2f, 0.2f));
    for (int64_t l = 0; l < cfg_.num_hidden_layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      norm(p + "input_layernorm.weight", d);
      norm(p + "post_attention_layernorm.weight", d);
      const std::string a = p + "self_attn.";
      if (cfg_.q_lora_rank) {
        linear(a + "q_a_proj", *cfg_.q_lora_rank, d, false);
        norm(a + "q_a_layernorm.weight", *cfg_.q_lora_rank);
        linear(a + "q_b_proj", H * cfg_.qk_head_dim(), *cfg_.q_lora_rank, false);
      } else {
        linear(a + "q_proj", H * cfg_.qk_head_dim(), d, false);
      }
      linear(a + "kv_a_proj_with_mqa", cfg_.kv_lora_rank + cfg_.qk_rope_head_dim, d, false);
      norm(a + "kv_a_layernorm.weight", cfg_.kv_lora_rank);
      linear(a + "kv_b_proj", H * (cfg_.qk_nope_head_dim + cfg_.v_head_dim), cfg_.kv_lora_rank, false);
      linear(a + "o_proj", d, H * cfg_.v_head_dim, false);
      if (!cfg_.is_moe_layer(l)) {
        mlp(p + "mlp.", cfg_.intermediate_size, false);
        continue;
      }
      const int64_t E = cfg_.n_routed_experts;
      const float a_gate = std::sqrt(3.0f / float(d));
      bf16(p + "mlp.gate.weight", {E, d}, uniform(E * d, -a_gate, a_gate));
      const std::vector<float> bias = uniform(E, -0.3f, 0.3f);
      src_.add(p + "mlp.gate.e_score_correction_bias", DType::F32, {E}, bias.data());
      for (int64_t e = 0; e < E; ++e) mlp(p + "mlp.experts." + std::to_string(e) + ".", cfg_.moe_intermediate_size, true);
      if (cfg_.n_shared_experts > 0)
        mlp(p + "mlp.shared_experts.", cfg_.n_shared_experts * cfg_.moe_intermediate_size, false);
    }
  }

 private:
  const ModelConfig& cfg_;
  MemoryTensorSource& src_;
  std::mt19937_64 rng_;
};

}  // namespace

json tiny_config_json(const TinyModelOptions& opt) {
  json j = {
      {"model_type", "deepseek_v3"},
      {"vocab_size", 97},
      {"hidden_size", opt.hidden},
      {"intermediate_size", 96},
      {"moe_intermediate_size", 32},
      {"num_hidden_layers", opt.layers},
      {"num_nextn_predict_layers", 0},
      {"first_k_dense_replace", 1},
      {"moe_layer_freq", 1},
      {"num_attention_heads", 4},
      {"q_lora_rank", opt.q_lora ? json(48) : json(nullptr)},
      {"kv_lora_rank", 32},
      {"qk_nope_head_dim", 16},
      {"qk_rope_head_dim", 8},
      {"v_head_dim", 16},
      {"n_routed_experts", 16},
      {"n_shared_experts", 1},
      {"num_experts_per_tok", 4},
      {"n_group", opt.n_group},
      {"topk_group", opt.n_group > 1 ? 2 : 1},
      {"norm_topk_prob", true},
      {"routed_scaling_factor", 2.5},
      {"scoring_func", "sigmoid"},
      {"topk_method", "noaux_tc"},
      {"rms_norm_eps", 1e-6},
      {"rope_theta", 10000.0},
      {"rope_scaling",
       {{"type", "yarn"}, {"factor", 40.0}, {"beta_fast", 32}, {"beta_slow", 1}, {"mscale", 1.0},
        {"mscale_all_dim", 1.0}, {"original_max_position_embeddings", 64}}},
      {"max_position_embeddings", 512},
      {"bos_token_id", 0},
      {"eos_token_id", 1},
      {"tie_word_embeddings", false},
  };
  if (opt.format == "fp8")
    j["quantization_config"] = {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"},
                                {"weight_block_size", {128, 128}}};
  if (opt.format == "int4")
    j["quantization_config"] = {
        {"quant_method", "compressed-tensors"},
        {"format", "pack-quantized"},
        {"config_groups",
         {{"group_0",
           {{"weights",
             {{"num_bits", 4}, {"group_size", 32}, {"symmetric", true}, {"type", "int"}, {"strategy", "group"}}}}}}}};
  return j;
}

ModelConfig tiny_config(const TinyModelOptions& opt) { return ModelConfig::from_json(tiny_config_json(opt), "tiny"); }

void fill_random_model(const ModelConfig& cfg, MemoryTensorSource& source, uint64_t seed) {
  Filler(cfg, source, seed).model();
}

}  // namespace trillion::test
