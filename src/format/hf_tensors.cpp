#include "format/hf_tensors.hpp"

#include <iterator>

#include "common/error.hpp"

namespace trillion {

const char* to_string(TensorRole r) {
  switch (r) {
    case TensorRole::embed: return "embed";
    case TensorRole::head: return "head";
    case TensorRole::layer: return "layer";
    case TensorRole::experts: return "experts";
    case TensorRole::mtp: return "mtp";
    case TensorRole::mtp_experts: return "mtp_experts";
  }
  return "?";
}

TensorRole tensor_role_from_string(const std::string& s) {
  for (TensorRole r : {TensorRole::embed, TensorRole::head, TensorRole::layer, TensorRole::experts,
                       TensorRole::mtp, TensorRole::mtp_experts})
    if (s == to_string(r)) return r;
  throw FormatError("unknown shard role '" + s + "'");
}

const char* to_string(LinearRole r) {
  switch (r) {
    case LinearRole::none: return "none";
    case LinearRole::attention: return "attention";
    case LinearRole::dense_mlp: return "dense_mlp";
    case LinearRole::shared_experts: return "shared_experts";
    case LinearRole::routed_experts: return "routed_experts";
    case LinearRole::lm_head: return "lm_head";
  }
  return "?";
}

namespace {

// The prefixes of the names of a decoder layer ("model.layers.7.") and of a
// routed expert ("model.layers.7.mlp.experts.40.").
std::string hf_layer_prefix(int64_t layer) { return "model.layers." + std::to_string(layer) + "."; }
std::string hf_expert_prefix(int64_t layer, int64_t expert) {
  return hf_layer_prefix(layer) + "mlp.experts." + std::to_string(expert) + ".";
}

// Where a name lives: the model's ends, a decoder layer, a routed expert.
enum class Scope : uint8_t { model, layer, expert };

// The table: every logical weight's HF name (within its scope), kind and
// role, in Weight's order. Shapes come from the config (layer_weights ...).
struct NameRow {
  Weight weight;
  Scope scope;
  const char* name;
  WeightKind kind;
  LinearRole linear = LinearRole::none;
};
constexpr LinearRole kAttn = LinearRole::attention, kDense = LinearRole::dense_mlp,
                     kShared = LinearRole::shared_experts, kRouted = LinearRole::routed_experts;
constexpr NameRow kNames[] = {
    {Weight::embed, Scope::model, "model.embed_tokens", WeightKind::bf16_matrix},
    {Weight::final_norm, Scope::model, "model.norm.weight", WeightKind::norm},
    {Weight::lm_head, Scope::model, "lm_head", WeightKind::head, LinearRole::lm_head},
    {Weight::input_norm, Scope::layer, "input_layernorm.weight", WeightKind::norm},
    {Weight::post_attn_norm, Scope::layer, "post_attention_layernorm.weight", WeightKind::norm},
    {Weight::q_a, Scope::layer, "self_attn.q_a_proj", WeightKind::linear, kAttn},
    {Weight::q_a_norm, Scope::layer, "self_attn.q_a_layernorm.weight", WeightKind::norm},
    {Weight::q_b, Scope::layer, "self_attn.q_b_proj", WeightKind::linear, kAttn},
    {Weight::q, Scope::layer, "self_attn.q_proj", WeightKind::linear, kAttn},
    {Weight::kv_a, Scope::layer, "self_attn.kv_a_proj_with_mqa", WeightKind::linear, kAttn},
    {Weight::kv_a_norm, Scope::layer, "self_attn.kv_a_layernorm.weight", WeightKind::norm},
    {Weight::kv_b, Scope::layer, "self_attn.kv_b_proj", WeightKind::linear, kAttn},
    {Weight::o, Scope::layer, "self_attn.o_proj", WeightKind::linear, kAttn},
    {Weight::mlp_gate, Scope::layer, "mlp.gate_proj", WeightKind::linear, kDense},
    {Weight::mlp_up, Scope::layer, "mlp.up_proj", WeightKind::linear, kDense},
    {Weight::mlp_down, Scope::layer, "mlp.down_proj", WeightKind::linear, kDense},
    {Weight::router, Scope::layer, "mlp.gate", WeightKind::bf16_matrix},
    {Weight::router_bias, Scope::layer, "mlp.gate.e_score_correction_bias", WeightKind::f32_vector},
    {Weight::shared_gate, Scope::layer, "mlp.shared_experts.gate_proj", WeightKind::linear, kShared},
    {Weight::shared_up, Scope::layer, "mlp.shared_experts.up_proj", WeightKind::linear, kShared},
    {Weight::shared_down, Scope::layer, "mlp.shared_experts.down_proj", WeightKind::linear, kShared},
    {Weight::expert_gate, Scope::expert, "gate_proj", WeightKind::expert, kRouted},
    {Weight::expert_up, Scope::expert, "up_proj", WeightKind::expert, kRouted},
    {Weight::expert_down, Scope::expert, "down_proj", WeightKind::expert, kRouted},
    {Weight::mtp_embed, Scope::layer, "embed_tokens", WeightKind::bf16_matrix},
    {Weight::mtp_enorm, Scope::layer, "enorm.weight", WeightKind::norm},
    {Weight::mtp_hnorm, Scope::layer, "hnorm.weight", WeightKind::norm},
    {Weight::mtp_head_norm, Scope::layer, "shared_head.norm.weight", WeightKind::norm},
    {Weight::mtp_eh_proj, Scope::layer, "eh_proj", WeightKind::linear},
    {Weight::mtp_head, Scope::layer, "shared_head.head", WeightKind::head},
};

constexpr bool in_weight_order() {
  for (size_t i = 0; i < std::size(kNames); ++i)
    if (size_t(kNames[i].weight) != i) return false;
  return true;
}
static_assert(in_weight_order() && std::size(kNames) == size_t(Weight::mtp_head) + 1,
              "kNames lists every Weight, in the enum's order");

const NameRow& row_of(Weight w) { return kNames[size_t(w)]; }

// `w` of layer `layer` / expert `expert` as [out, in] (in: 0 for a vector).
WeightSpec spec(Weight w, int64_t out, int64_t in = 0, int64_t layer = -1, int64_t expert = -1) {
  const NameRow& r = row_of(w);
  return WeightSpec{w, hf_name(w, layer, expert), r.kind, out, in, r.linear};
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Expands each logical weight into the tensors its format stores.
class TableBuilder {
 public:
  explicit TableBuilder(const ModelConfig& cfg) : cfg_(cfg) {}

  void add(const WeightSpec& s, TensorRole role, int64_t layer, int64_t expert) {
    auto push = [&](std::string name, std::vector<int64_t> shape, DType dt, bool attr = false) {
      std::vector<DType> dtypes = {dt};
      // compressed-tensors writes torch.tensor(shape): int64 unless the writer chose int32.
      if (attr) dtypes.push_back(DType::I64);
      out_.push_back(
          ExpectedTensor{std::move(name), std::move(shape), std::move(dtypes), role, layer, expert, attr, s.linear});
    };
    switch (s.kind) {
      case WeightKind::norm: push(s.name, {s.out}, DType::BF16); return;
      case WeightKind::bf16_matrix: push(s.name + ".weight", {s.out, s.in}, DType::BF16); return;
      case WeightKind::f32_vector: push(s.name, {s.out}, DType::F32); return;
      case WeightKind::head:
        if (!cfg_.requantized) {
          push(s.name + ".weight", {s.out, s.in}, DType::BF16);
          return;
        }
        break;
      case WeightKind::linear:
      case WeightKind::expert: break;
    }
    const std::string w = s.name + ".weight";
    switch (cfg_.weight_format) {
      case WeightFormat::bf16:
        push(w, {s.out, s.in}, DType::BF16);
        return;
      case WeightFormat::fp8_block:  // LIN and EXP alike: e4m3 + f32 scale per 128x128 block
        push(w, {s.out, s.in}, DType::F8_E4M3);
        push(w + "_scale_inv", {ceil_div(s.out, 128), ceil_div(s.in, 128)}, DType::F32);
        return;
      case WeightFormat::int4_group:  // native: only routed experts are quantized
        if (s.kind == WeightKind::linear && !cfg_.requantized) {
          push(w, {s.out, s.in}, DType::BF16);
          return;
        }
        if (s.in % 32) {
          if (cfg_.requantized) {  // convert --quantize int4 keeps such a matrix BF16
            push(w, {s.out, s.in}, DType::BF16);
            return;
          }
          throw ConfigError("int4 checkpoint: input width " + std::to_string(s.in) + " of " + s.name +
                            " is not a multiple of the group size 32");
        }
        push(w + "_packed", {s.out, s.in / 8}, DType::I32);
        push(w + "_scale", {s.out, s.in / 32}, DType::BF16);
        push(w + "_shape", {2}, DType::I32, /*attr=*/true);
        return;
      case WeightFormat::int8_group:  // convert --quantize int8: int8 q + bf16 scale per 32 columns
        push(w, {s.out, s.in}, DType::I8);
        push(w + "_scale", {s.out, ceil_div(s.in, 32)}, DType::BF16);
        return;
    }
  }

  std::vector<ExpectedTensor> build() {
    const ModelConfig& c = cfg_;
    add(embed_weight(c), TensorRole::embed, -1, -1);
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      for (const WeightSpec& s : layer_weights(c, l)) add(s, TensorRole::layer, l, -1);
      if (!c.is_moe_layer(l)) continue;
      for (int64_t e = 0; e < c.n_routed_experts; ++e)
        for (const WeightSpec& s : expert_weights(c, l, e)) add(s, TensorRole::experts, l, e);
    }
    for (const WeightSpec& s : head_weights(c)) add(s, TensorRole::head, -1, -1);
    return std::move(out_);
  }

 private:
  const ModelConfig& cfg_;
  std::vector<ExpectedTensor> out_;
};

// Parses the decimal number at name[pos...] up to the next '.', or -1.
int64_t number_at(const std::string& name, size_t pos, size_t* end) {
  size_t dot = name.find('.', pos);
  if (dot == std::string::npos || dot == pos || dot - pos > 9) return -1;
  int64_t v = 0;
  for (size_t i = pos; i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    v = v * 10 + (name[i] - '0');
  }
  *end = dot + 1;
  return v;
}

}  // namespace

std::string hf_name(Weight w, int64_t layer, int64_t expert) {
  const NameRow& r = row_of(w);
  switch (r.scope) {
    case Scope::model: return r.name;
    case Scope::layer: return hf_layer_prefix(layer) + r.name;
    case Scope::expert: return hf_expert_prefix(layer, expert) + r.name;
  }
  return r.name;
}

WeightSpec embed_weight(const ModelConfig& c) { return spec(Weight::embed, c.vocab_size, c.hidden_size); }

std::vector<WeightSpec> layer_weights(const ModelConfig& c, int64_t l) {
  const int64_t d = c.hidden_size, H = c.num_attention_heads;
  std::vector<WeightSpec> w = {spec(Weight::input_norm, d, 0, l), spec(Weight::post_attn_norm, d, 0, l)};
  if (c.q_lora_rank) {
    w.push_back(spec(Weight::q_a, *c.q_lora_rank, d, l));
    w.push_back(spec(Weight::q_a_norm, *c.q_lora_rank, 0, l));
    w.push_back(spec(Weight::q_b, H * c.qk_head_dim(), *c.q_lora_rank, l));
  } else {
    w.push_back(spec(Weight::q, H * c.qk_head_dim(), d, l));
  }
  w.push_back(spec(Weight::kv_a, c.kv_lora_rank + c.qk_rope_head_dim, d, l));
  w.push_back(spec(Weight::kv_a_norm, c.kv_lora_rank, 0, l));
  w.push_back(spec(Weight::kv_b, H * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank, l));
  w.push_back(spec(Weight::o, d, H * c.v_head_dim, l));
  if (!c.is_moe_layer(l)) {
    w.push_back(spec(Weight::mlp_gate, c.intermediate_size, d, l));
    w.push_back(spec(Weight::mlp_up, c.intermediate_size, d, l));
    w.push_back(spec(Weight::mlp_down, d, c.intermediate_size, l));
    return w;
  }
  w.push_back(spec(Weight::router, c.n_routed_experts, d, l));
  w.push_back(spec(Weight::router_bias, c.n_routed_experts, 0, l));
  if (c.n_shared_experts > 0) {
    const int64_t width = c.n_shared_experts * c.moe_intermediate_size;
    w.push_back(spec(Weight::shared_gate, width, d, l));
    w.push_back(spec(Weight::shared_up, width, d, l));
    w.push_back(spec(Weight::shared_down, d, width, l));
  }
  return w;
}

std::vector<WeightSpec> expert_weights(const ModelConfig& c, int64_t l, int64_t e) {
  const int64_t d = c.hidden_size, m = c.moe_intermediate_size;
  return {spec(Weight::expert_gate, m, d, l, e), spec(Weight::expert_up, m, d, l, e),
          spec(Weight::expert_down, d, m, l, e)};
}

std::vector<WeightSpec> head_weights(const ModelConfig& c) {
  return {spec(Weight::final_norm, c.hidden_size), spec(Weight::lm_head, c.vocab_size, c.hidden_size)};
}

std::vector<WeightSpec> mtp_weights(const ModelConfig& c) {
  const int64_t d = c.hidden_size, l = c.num_hidden_layers;
  return {spec(Weight::mtp_embed, c.vocab_size, d, l), spec(Weight::mtp_enorm, d, 0, l),
          spec(Weight::mtp_hnorm, d, 0, l),           spec(Weight::mtp_head_norm, d, 0, l),
          spec(Weight::mtp_eh_proj, d, 2 * d, l),     spec(Weight::mtp_head, c.vocab_size, d, l)};
}

std::vector<ExpectedTensor> expected_hf_tensors(const ModelConfig& cfg) { return TableBuilder(cfg).build(); }

HfNameParts parse_hf_name(const std::string& name) {
  HfNameParts parts;
  static const std::string kLayers = "model.layers.", kExperts = "mlp.experts.";
  if (name.rfind(kLayers, 0) != 0) return parts;
  size_t pos = 0;
  parts.layer = number_at(name, kLayers.size(), &pos);
  if (parts.layer < 0) return parts;
  if (name.compare(pos, kExperts.size(), kExperts) == 0) {
    size_t end = 0;
    parts.expert = number_at(name, pos + kExperts.size(), &end);
  }
  return parts;
}

std::string packed_name_for_shape(const std::string& name) {
  static const std::string kShape = ".weight_shape";
  if (name.size() <= kShape.size() || name.compare(name.size() - kShape.size(), kShape.size(), kShape) != 0)
    return "";
  return name.substr(0, name.size() - kShape.size()) + ".weight_packed";
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

}  // namespace trillion
