#include "format/hf_tensors.hpp"


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

std::string hf_layer_prefix(int64_t layer) { return "model.layers." + std::to_string(layer) + "."; }

std::string hf_expert_prefix(int64_t layer, int64_t expert) {
  return hf_layer_prefix(layer) + "mlp.experts." + std::to_string(expert) + ".";
}

namespace {

// How a logical weight is stored, per docs/checkpoint.md "Formats of each kind".
enum class Kind {
  norm,         // RMSNorm weight [n]: BF16 in every format
  linear,       // LIN: a linear layer outside the routed experts
  expert,       // EXP: a routed expert's linear layer
  bf16_matrix,  // embedding, router (mlp.gate.weight): BF16 in every format
  head,         // lm_head: BF16 in every native format; as a linear layer when requantized
  f32_vector,   // mlp.gate.e_score_correction_bias: F32 in every format
};

// One row of the table: a logical weight with its [out, in] (in unused for 1-D kinds).
struct Spec {
  std::string name;  // without ".weight" for linear/expert/head kinds (the format adds the suffixes)
  Kind kind;
  int64_t out;
  int64_t in = 0;
  LinearRole linear = LinearRole::none;
};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

class TableBuilder {
 public:
  explicit TableBuilder(const ModelConfig& cfg) : cfg_(cfg) {}

  // Expands one logical weight into the tensors its format stores.
  void add(const Spec& s, TensorRole role, int64_t layer, int64_t expert) {
    auto push = [&](std::string name, std::vector<int64_t> shape, DType dt, bool attr = false) {
      std::vector<DType> dtypes = {dt};
      // compressed-tensors writes torch.tensor(shape): int64 unless the writer chose int32.
      if (attr) dtypes.push_back(DType::I64);
      out_.push_back(
          ExpectedTensor{std::move(name), std::move(shape), std::move(dtypes), role, layer, expert, attr, s.linear});
    };
    switch (s.kind) {
      case Kind::norm: push(s.name, {s.out}, DType::BF16); return;
      case Kind::bf16_matrix: push(s.name, {s.out, s.in}, DType::BF16); return;
      case Kind::f32_vector: push(s.name, {s.out}, DType::F32); return;
      case Kind::head:
        if (!cfg_.requantized) {
          push(s.name + ".weight", {s.out, s.in}, DType::BF16);
          return;
        }
        break;
      case Kind::linear:
      case Kind::expert: break;
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
        if (s.kind == Kind::linear && !cfg_.requantized) {
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
    constexpr LinearRole kAttn = LinearRole::attention, kDense = LinearRole::dense_mlp,
                         kShared = LinearRole::shared_experts, kRouted = LinearRole::routed_experts;
    const ModelConfig& c = cfg_;
    const int64_t d = c.hidden_size, H = c.num_attention_heads;
    add({"model.embed_tokens.weight", Kind::bf16_matrix, c.vocab_size, d}, TensorRole::embed, -1, -1);
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      const std::string p = hf_layer_prefix(l);
      std::vector<Spec> layer = {
          {p + "input_layernorm.weight", Kind::norm, d},
          {p + "post_attention_layernorm.weight", Kind::norm, d},
      };
      if (c.q_lora_rank) {
        layer.push_back({p + "self_attn.q_a_proj", Kind::linear, *c.q_lora_rank, d, kAttn});
        layer.push_back({p + "self_attn.q_a_layernorm.weight", Kind::norm, *c.q_lora_rank});
        layer.push_back({p + "self_attn.q_b_proj", Kind::linear, H * c.qk_head_dim(), *c.q_lora_rank, kAttn});
      } else {
        layer.push_back({p + "self_attn.q_proj", Kind::linear, H * c.qk_head_dim(), d, kAttn});
      }
      layer.push_back(
          {p + "self_attn.kv_a_proj_with_mqa", Kind::linear, c.kv_lora_rank + c.qk_rope_head_dim, d, kAttn});
      layer.push_back({p + "self_attn.kv_a_layernorm.weight", Kind::norm, c.kv_lora_rank});
      layer.push_back({p + "self_attn.kv_b_proj", Kind::linear, H * (c.qk_nope_head_dim + c.v_head_dim),
                       c.kv_lora_rank, kAttn});
      layer.push_back({p + "self_attn.o_proj", Kind::linear, d, H * c.v_head_dim, kAttn});
      if (!c.is_moe_layer(l)) {
        layer.push_back({p + "mlp.gate_proj", Kind::linear, c.intermediate_size, d, kDense});
        layer.push_back({p + "mlp.up_proj", Kind::linear, c.intermediate_size, d, kDense});
        layer.push_back({p + "mlp.down_proj", Kind::linear, d, c.intermediate_size, kDense});
      } else {
        layer.push_back({p + "mlp.gate.weight", Kind::bf16_matrix, c.n_routed_experts, d});
        layer.push_back({p + "mlp.gate.e_score_correction_bias", Kind::f32_vector, c.n_routed_experts});
        if (c.n_shared_experts > 0) {
          const int64_t w = c.n_shared_experts * c.moe_intermediate_size;
          layer.push_back({p + "mlp.shared_experts.gate_proj", Kind::linear, w, d, kShared});
          layer.push_back({p + "mlp.shared_experts.up_proj", Kind::linear, w, d, kShared});
          layer.push_back({p + "mlp.shared_experts.down_proj", Kind::linear, d, w, kShared});
        }
      }
      for (const Spec& s : layer) add(s, TensorRole::layer, l, -1);
      if (!c.is_moe_layer(l)) continue;
      const int64_t m = c.moe_intermediate_size;
      for (int64_t e = 0; e < c.n_routed_experts; ++e) {
        const std::string ep = hf_expert_prefix(l, e);
        add({ep + "gate_proj", Kind::expert, m, d, kRouted}, TensorRole::experts, l, e);
        add({ep + "up_proj", Kind::expert, m, d, kRouted}, TensorRole::experts, l, e);
        add({ep + "down_proj", Kind::expert, d, m, kRouted}, TensorRole::experts, l, e);
      }
    }
    add({"model.norm.weight", Kind::norm, d}, TensorRole::head, -1, -1);
    add({"lm_head", Kind::head, c.vocab_size, d, LinearRole::lm_head}, TensorRole::head, -1, -1);
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
