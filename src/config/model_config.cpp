#include "config/model_config.hpp"

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/error.hpp"

namespace trillion {

const char* to_string(WeightFormat f) {
  switch (f) {
    case WeightFormat::bf16: return "bf16";
    case WeightFormat::fp8_block: return "fp8";
    case WeightFormat::int4_group: return "int4";
    case WeightFormat::int8_group: return "int8";
  }
  return "?";
}

WeightFormat weight_format_from_string(const std::string& s) {
  if (s == "bf16") return WeightFormat::bf16;
  if (s == "fp8") return WeightFormat::fp8_block;
  if (s == "int4") return WeightFormat::int4_group;
  if (s == "int8") return WeightFormat::int8_group;
  throw ConfigError("unknown weight format '" + s + "' (expected bf16, fp8, int4 or int8)");
}

std::string quantization_path_refused(WeightFormat from, WeightFormat to) {
  if (to == WeightFormat::bf16) return "--quantize must be int8, int4 or fp8";
  if (from == WeightFormat::bf16) return "";
  if (from == WeightFormat::fp8_block && to == WeightFormat::int8_group) return "";
  if (from == WeightFormat::fp8_block)
    return std::string("an fp8 checkpoint is quantized to int8 only, not ") + to_string(to);
  return std::string("--quantize needs a bf16 or fp8 checkpoint; this one is ") + to_string(from);
}

std::string quantization_refused(const ModelConfig& cfg, WeightFormat to) {
  if (cfg.requantized && to != WeightFormat::bf16)
    return std::string("the weights were already quantized to ") + to_string(cfg.weight_format) +
           " by trillion convert --quantize";
  return quantization_path_refused(cfg.weight_format, to);
}

namespace {

using nlohmann::json;

// Upper bounds of the sizes config.json may declare. Far above the family's
// real configs (DeepSeek-V3: hidden 7168, 61 layers, 256 experts, 128 heads,
// vocabulary 129280; Kimi K2: 384 experts, 163840 positions), and low enough
// that every product the code forms from them (weight shapes, KV-cache and
// activation bytes) stays far inside int64: a typo or a hostile file is an
// error here, not an overflow or an allocation the kernel kills later.
constexpr int64_t kMaxWidth = int64_t(1) << 20;   // hidden, intermediate, LoRA ranks, head dims
constexpr int64_t kMaxCount = int64_t(1) << 16;   // layers, heads, experts
constexpr int64_t kMaxVocab = int64_t(1) << 24;
constexpr int64_t kMaxPositions = INT32_MAX;      // positions are int32 in batches and the KV cache

struct Reader {
  const json& j;
  const std::string& source;

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw ConfigError(source + ": field '" + key + "' " + what);
  }
  const json& need(const std::string& key) const {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) fail(key, "is missing");
    return *it;
  }
  int64_t integer(const std::string& key, int64_t min = 0, int64_t max = kMaxCount) const {
    const json& v = need(key);
    // An unsigned value above INT64_MAX would wrap to a negative int64.
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)))
      fail(key, "must be an integer, got " + v.dump());
    int64_t x = v.get<int64_t>();
    if (x < min) fail(key, "must be >= " + std::to_string(min) + ", got " + std::to_string(x));
    if (x > max) fail(key, "must be <= " + std::to_string(max) + ", got " + std::to_string(x));
    return x;
  }
  int64_t integer_or(const std::string& key, int64_t dflt, int64_t min = 0, int64_t max = kMaxCount) const {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return dflt;
    return integer(key, min, max);
  }
  // A number that must be finite and above zero (a scale, an epsilon, a base).
  double positive(const std::string& key) const {
    const double x = number(key);
    if (!(x > 0) || !std::isfinite(x)) fail(key, "must be a finite number > 0, got " + std::to_string(x));
    return x;
  }
  double number(const std::string& key) const {
    const json& v = need(key);
    if (!v.is_number()) fail(key, "must be a number, got " + v.dump());
    return v.get<double>();
  }
  double number_or(const std::string& key, double dflt) const {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return dflt;
    return number(key);
  }
  std::string string(const std::string& key) const {
    const json& v = need(key);
    if (!v.is_string()) fail(key, "must be a string, got " + v.dump());
    return v.get<std::string>();
  }
  bool boolean_or(const std::string& key, bool dflt) const {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return dflt;
    if (!it->is_boolean()) fail(key, "must be true or false, got " + it->dump());
    return it->get<bool>();
  }
};

WeightFormat parse_quantization(const json& j, const std::string& source, bool* requantized,
                                WeightFormat* requantized_from) {
  *requantized = false;
  auto it = j.find("quantization_config");
  if (it == j.end() || it->is_null()) return WeightFormat::bf16;
  const json& q = *it;
  if (!q.is_object()) throw ConfigError(source + ": quantization_config must be an object");
  const std::string method = q.value("quant_method", "");
  if (method == "trillion") {  // written by `trillion convert --quantize` (docs/format.md)
    const std::string from = q.value("quantized_from", "");
    if (from != "bf16" && from != "fp8")
      throw ConfigError(source + ": quantization_config.quantized_from must be \"bf16\" or \"fp8\", got \"" + from +
                        "\"");
    const std::string fmt = q.value("weight_format", "");
    if (fmt != "int8" && fmt != "int4" && fmt != "fp8")
      throw ConfigError(source + ": quantization_config.weight_format must be int8, int4 or fp8, got \"" + fmt +
                        "\"");
    if (const std::string why = quantization_path_refused(weight_format_from_string(from), weight_format_from_string(fmt));
        !why.empty())
      throw ConfigError(source + ": quantization_config (quantized_from " + from + ", weight_format " + fmt + "): " + why);
    *requantized = true;
    *requantized_from = weight_format_from_string(from);
    return weight_format_from_string(fmt);
  }
  if (method == "fp8") {
    if (q.value("fmt", "e4m3") != "e4m3")
      throw ConfigError(source + ": quantization_config.fmt must be e4m3");
    auto bs = q.value("weight_block_size", json::array({128, 128}));
    if (bs != json::array({128, 128}))
      throw ConfigError(source + ": quantization_config.weight_block_size must be [128, 128], got " +
                        bs.dump());
    return WeightFormat::fp8_block;
  }
  if (method == "compressed-tensors") {
    if (q.value("format", "") != "pack-quantized")
      throw ConfigError(source + ": compressed-tensors format must be pack-quantized, got " +
                        q.value("format", std::string("(none)")));
    const json& groups = q.at("config_groups");
    for (const auto& [name, g] : groups.items()) {
      const json& w = g.at("weights");
      if (w.value("num_bits", 0) != 4 || w.value("group_size", 0) != 32 ||
          !w.value("symmetric", false) || w.value("type", "") != "int")
        throw ConfigError(source + ": compressed-tensors group '" + name +
                          "' must be symmetric int, 4 bits, group 32");
    }
    return WeightFormat::int4_group;
  }
  throw ConfigError(source + ": unsupported quantization_config.quant_method '" + method + "'");
}

}  // namespace

double ModelConfig::softmax_scale() const {
  double scale = 1.0 / std::sqrt(double(qk_head_dim()));
  if (rope_scaling && rope_scaling->mscale_all_dim != 0.0 && rope_scaling->factor > 1.0) {
    double m = 0.1 * rope_scaling->mscale_all_dim * std::log(rope_scaling->factor) + 1.0;
    scale *= m * m;
  }
  return scale;
}

ModelConfig ModelConfig::from_json(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) throw ConfigError(source + ": not a JSON object");
  Reader r{j, source};
  ModelConfig c;
  c.model_type = r.string("model_type");
  if (c.model_type != "deepseek_v3" && c.model_type != "kimi_k2")
    throw ConfigError(source + ": model_type '" + c.model_type +
                      "' is not of the DeepSeek-V3 family (deepseek_v3, kimi_k2)");
  c.vocab_size = r.integer("vocab_size", 1, kMaxVocab);
  c.hidden_size = r.integer("hidden_size", 1, kMaxWidth);
  c.intermediate_size = r.integer("intermediate_size", 1, kMaxWidth);
  c.moe_intermediate_size = r.integer("moe_intermediate_size", 1, kMaxWidth);
  c.num_hidden_layers = r.integer("num_hidden_layers", 1);
  c.num_nextn_predict_layers = r.integer_or("num_nextn_predict_layers", 0);
  c.first_k_dense_replace = r.integer("first_k_dense_replace");
  c.moe_layer_freq = r.integer_or("moe_layer_freq", 1, 1);
  c.num_attention_heads = r.integer("num_attention_heads", 1);
  if (j.contains("q_lora_rank") && !j["q_lora_rank"].is_null())
    c.q_lora_rank = r.integer("q_lora_rank", 1, kMaxWidth);
  c.kv_lora_rank = r.integer("kv_lora_rank", 1, kMaxWidth);
  c.qk_nope_head_dim = r.integer("qk_nope_head_dim", 1, kMaxWidth);
  c.qk_rope_head_dim = r.integer("qk_rope_head_dim", 2, kMaxWidth);
  if (c.qk_rope_head_dim % 2) r.fail("qk_rope_head_dim", "must be even");
  c.v_head_dim = r.integer("v_head_dim", 1, kMaxWidth);
  c.n_routed_experts = r.integer("n_routed_experts", 1);
  c.n_shared_experts = r.integer_or("n_shared_experts", 0);
  c.num_experts_per_tok = r.integer("num_experts_per_tok", 1);
  c.n_group = r.integer_or("n_group", 1, 1);
  c.topk_group = r.integer_or("topk_group", 1, 1);
  c.norm_topk_prob = r.boolean_or("norm_topk_prob", true);
  c.routed_scaling_factor = r.number_or("routed_scaling_factor", 1.0);
  c.scoring_func = r.string("scoring_func");
  if (c.scoring_func != "sigmoid") r.fail("scoring_func", "must be \"sigmoid\", got \"" + c.scoring_func + "\"");
  c.topk_method = r.string("topk_method");
  if (c.topk_method != "noaux_tc") r.fail("topk_method", "must be \"noaux_tc\", got \"" + c.topk_method + "\"");
  c.rms_norm_eps = r.positive("rms_norm_eps");
  c.rope_theta = r.positive("rope_theta");
  c.max_position_embeddings = r.integer("max_position_embeddings", 1, kMaxPositions);
  c.tie_word_embeddings = r.boolean_or("tie_word_embeddings", false);
  if (c.tie_word_embeddings) r.fail("tie_word_embeddings", "must be false (the family has an untied lm_head)");
  c.bos_token_id = r.integer_or("bos_token_id", -1, -1, kMaxVocab);
  if (auto it = j.find("eos_token_id"); it != j.end() && !it->is_null()) {
    if (it->is_array()) {
      // Checked like every integer field (found by fuzzing: ["x"] escaped as a
      // json type_error, 1e300 was undefined behaviour in get<int64_t>).
      for (const auto& e : *it) {
        if (!e.is_number_integer()) r.fail("eos_token_id", "must hold integers, got " + it->dump());
        c.eos_token_ids.push_back(e.get<int64_t>());
      }
    } else {
      c.eos_token_ids.push_back(r.integer("eos_token_id", 0, kMaxVocab));
    }
  }
  if (auto it = j.find("rope_scaling"); it != j.end() && !it->is_null()) {
    Reader rr{*it, source};
    RopeScaling s;
    s.type = it->contains("type") ? rr.string("type") : rr.string("rope_type");
    if (s.type != "yarn") throw ConfigError(source + ": rope_scaling.type '" + s.type + "' is not supported (yarn)");
    s.factor = rr.number("factor");
    if (!(s.factor >= 1) || !std::isfinite(s.factor)) rr.fail("factor", "must be a finite number >= 1");
    s.beta_fast = rr.number_or("beta_fast", 32.0);
    s.beta_slow = rr.number_or("beta_slow", 1.0);
    s.mscale = rr.number_or("mscale", 1.0);
    s.mscale_all_dim = rr.number_or("mscale_all_dim", 0.0);
    s.original_max_position_embeddings = rr.integer("original_max_position_embeddings", 1, kMaxPositions);
    c.rope_scaling = s;
  }
  c.weight_format = parse_quantization(j, source, &c.requantized, &c.requantized_from);

  // Cross-field checks: a config that would index out of bounds is refused here.
  if (c.n_routed_experts % c.n_group)
    throw ConfigError(source + ": n_routed_experts (" + std::to_string(c.n_routed_experts) +
                      ") is not divisible by n_group (" + std::to_string(c.n_group) + ")");
  if (c.topk_group > c.n_group) r.fail("topk_group", "exceeds n_group");
  if (c.num_experts_per_tok > c.topk_group * (c.n_routed_experts / c.n_group))
    r.fail("num_experts_per_tok", "exceeds the experts in the kept groups");
  if (c.n_group > 1 && c.n_routed_experts / c.n_group < 2)
    r.fail("n_group", "needs at least 2 experts per group (group score = sum of top-2)");
  if (c.first_k_dense_replace > c.num_hidden_layers) r.fail("first_k_dense_replace", "exceeds num_hidden_layers");
  if (c.bos_token_id >= c.vocab_size) r.fail("bos_token_id", "is outside the vocabulary");
  for (int64_t e : c.eos_token_ids)
    if (e < 0 || e >= c.vocab_size) r.fail("eos_token_id", "is outside the vocabulary");
  return c;
}

ModelConfig ModelConfig::from_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError(path + ": cannot open");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(path + ": not valid JSON: " + e.what());
  }
  return from_json(j, path);
}

}  // namespace trillion
