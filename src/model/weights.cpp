#include "model/weights.hpp"

#include "common/error.hpp"

namespace trillion {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// The tensor, checked for dtype (one of `dtypes`), shape and byte size.
TensorView fetch(TensorSource& src, const std::string& name, std::initializer_list<DType> dtypes,
                 const std::vector<int64_t>& shape) {
  TensorView t = src.tensor(name);
  bool dtype_ok = false;
  std::string allowed;
  for (DType d : dtypes) {
    dtype_ok = dtype_ok || t.dtype == d;
    allowed += (allowed.empty() ? "" : " or ") + std::string(dtype_name(d));
  }
  if (!dtype_ok)
    throw FormatError(name + ": dtype " + dtype_name(t.dtype) + ", expected " + allowed);
  if (t.shape != shape)
    throw FormatError(name + ": shape " + shape_str(t.shape) + ", expected " + shape_str(shape));
  if (t.nbytes < size_t(t.numel()) * dtype_size(t.dtype) || (!t.data && t.numel() > 0))
    throw FormatError(name + ": " + std::to_string(t.nbytes) + " bytes of data, too few for " +
                      shape_str(t.shape) + " " + dtype_name(t.dtype));
  return t;
}

MlpWeights load_mlp(TensorSource& src, const std::string& prefix, int64_t d, int64_t width) {
  MlpWeights m;
  m.gate = load_linear(src, prefix + "gate_proj", width, d);
  m.up = load_linear(src, prefix + "up_proj", width, d);
  m.down = load_linear(src, prefix + "down_proj", d, width);
  return m;
}

AttentionWeights load_attention(const ModelConfig& cfg, TensorSource& src, const std::string& p) {
  const int64_t d = cfg.hidden_size, H = cfg.num_attention_heads, r = cfg.kv_lora_rank;
  const int64_t rope = cfg.qk_rope_head_dim;
  AttentionWeights a;
  a.has_q_lora = cfg.q_lora_rank.has_value();
  if (a.has_q_lora) {
    const int64_t ql = *cfg.q_lora_rank;
    a.q_a = load_linear(src, p + "q_a_proj", ql, d);
    a.q_a_norm = load_vector(src, p + "q_a_layernorm.weight", ql);
    a.q_b = load_linear(src, p + "q_b_proj", H * cfg.qk_head_dim(), ql);
  } else {
    a.q = load_linear(src, p + "q_proj", H * cfg.qk_head_dim(), d);
  }
  a.kv_a = load_linear(src, p + "kv_a_proj_with_mqa", r + rope, d);
  a.kv_a_norm = load_vector(src, p + "kv_a_layernorm.weight", r);
  a.kv_b = load_linear(src, p + "kv_b_proj", H * (cfg.qk_nope_head_dim + cfg.v_head_dim), r);
  a.o = load_linear(src, p + "o_proj", d, H * cfg.v_head_dim);
  return a;
}

std::string layer_prefix(int64_t layer) { return "model.layers." + std::to_string(layer) + "."; }

}  // namespace

VecView load_vector(TensorSource& src, const std::string& name, int64_t size) {
  TensorView t = fetch(src, name, {DType::BF16, DType::F32}, {size});
  return VecView{t.dtype, t.data, size};
}

QMatrix load_linear(TensorSource& src, const std::string& prefix, int64_t rows, int64_t cols) {
  QMatrix m;
  m.rows = rows;
  m.cols = cols;
  if (src.has(prefix + ".weight_packed")) {  // compressed-tensors int4, group 32
    if (cols % 32)
      throw FormatError(prefix + ".weight_packed: int4 needs in_features % 32 == 0, expected [" +
                        std::to_string(rows) + ", " + std::to_string(cols) + "]");
    const TensorView packed = fetch(src, prefix + ".weight_packed", {DType::I32}, {rows, cols / 8});
    const TensorView scale = fetch(src, prefix + ".weight_scale", {DType::BF16}, {rows, cols / 32});
    if (src.has(prefix + ".weight_shape")) {
      const TensorView shape = fetch(src, prefix + ".weight_shape", {DType::I32, DType::I64}, {2});
      const int64_t s0 = shape.dtype == DType::I32 ? shape.as<int32_t>()[0] : shape.as<int64_t>()[0];
      const int64_t s1 = shape.dtype == DType::I32 ? shape.as<int32_t>()[1] : shape.as<int64_t>()[1];
      if (s0 != rows || s1 != cols)
        throw FormatError(prefix + ".weight_shape: [" + std::to_string(s0) + ", " + std::to_string(s1) +
                          "], expected [" + std::to_string(rows) + ", " + std::to_string(cols) + "]");
    }
    m.format = MatFormat::INT4_G32;
    m.data = packed.data;
    m.scale = scale.data;
    m.scale_cols = cols / 32;
    return m;
  }
  const std::string name = prefix + ".weight";
  const TensorView w = fetch(src, name, {DType::BF16, DType::F32, DType::F8_E4M3, DType::I8}, {rows, cols});
  m.data = w.data;
  if (w.dtype == DType::I8) {  // convert --quantize int8: bf16 scale per 32 columns (last group partial)
    const int64_t sc = (cols + 31) / 32;
    const TensorView s = fetch(src, prefix + ".weight_scale", {DType::BF16}, {rows, sc});
    m.format = MatFormat::INT8_G32;
    m.scale = s.data;
    m.scale_cols = sc;
  } else if (w.dtype == DType::F8_E4M3) {
    const int64_t sr = (rows + 127) / 128, sc = (cols + 127) / 128;
    const TensorView s = fetch(src, prefix + ".weight_scale_inv", {DType::F32}, {sr, sc});
    m.format = MatFormat::FP8_B128;
    m.scale = s.data;
    m.scale_cols = sc;
  } else {
    m.format = w.dtype == DType::BF16 ? MatFormat::BF16 : MatFormat::F32;
  }
  return m;
}

MlpWeights load_expert(const ModelConfig& cfg, TensorSource& src, int64_t layer, int64_t expert) {
  return load_mlp(src, layer_prefix(layer) + "mlp.experts." + std::to_string(expert) + ".", cfg.hidden_size,
                  cfg.moe_intermediate_size);
}

LayerWeights load_layer(const ModelConfig& cfg, TensorSource& src, int64_t l) {
  const int64_t d = cfg.hidden_size;
  const std::string p = layer_prefix(l);
  LayerWeights L;
  L.layer = l;
  L.input_norm = load_vector(src, p + "input_layernorm.weight", d);
  L.post_attn_norm = load_vector(src, p + "post_attention_layernorm.weight", d);
  L.attn = load_attention(cfg, src, p + "self_attn.");
  L.is_moe = cfg.is_moe_layer(l);
  if (L.is_moe) {
    L.moe.gate = load_linear(src, p + "mlp.gate", cfg.n_routed_experts, d);
    L.moe.bias = load_vector(src, p + "mlp.gate.e_score_correction_bias", cfg.n_routed_experts);
    L.moe.has_shared = cfg.n_shared_experts > 0;
    if (L.moe.has_shared)
      L.moe.shared = load_mlp(src, p + "mlp.shared_experts.", d, cfg.n_shared_experts * cfg.moe_intermediate_size);
  } else {
    L.mlp = load_mlp(src, p + "mlp.", d, cfg.intermediate_size);
  }
  return L;
}

ModelWeights ModelWeights::load(const ModelConfig& cfg, const LayerRange& range, TensorSource& src) {
  if (range.begin < 0 || range.end > cfg.num_hidden_layers || range.begin > range.end)
    throw ConfigError("layer range [" + std::to_string(range.begin) + ", " + std::to_string(range.end) +
                      ") outside the model's " + std::to_string(cfg.num_hidden_layers) + " layers");
  const int64_t d = cfg.hidden_size;
  ModelWeights w;
  if (range.has_embed) w.embed = load_linear(src, "model.embed_tokens", cfg.vocab_size, d);
  if (range.head_split < 0 || range.head_split >= cfg.vocab_size)
    throw ConfigError("head split " + std::to_string(range.head_split) + " outside the vocabulary's " +
                      std::to_string(cfg.vocab_size) + " rows");
  if (range.has_head) w.final_norm = load_vector(src, "model.norm.weight", d);
  if (range.holds_head_rows()) {
    // A view of the held rows: mapped weights, so the other rows' pages are never touched.
    const int64_t b = range.head_begin(), e = range.head_end(cfg.vocab_size);
    w.lm_head = load_linear(src, "lm_head", cfg.vocab_size, d).row_range(b, e - b);
  }
  for (int64_t l = range.begin; l < range.end; ++l) w.layers.push_back(load_layer(cfg, src, l));
  return w;
}

}  // namespace trillion
