#include "model/weights.hpp"

#include "common/error.hpp"
#include "format/hf_tensors.hpp"

namespace trillion {
namespace {

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
    throw FormatError(name + ": shape " + shape_string(t.shape) + ", expected " + shape_string(shape));
  if (t.nbytes < size_t(t.numel()) * dtype_size(t.dtype) || (!t.data && t.numel() > 0))
    throw FormatError(name + ": " + std::to_string(t.nbytes) + " bytes of data, too few for " +
                      shape_string(t.shape) + " " + dtype_name(t.dtype));
  return t;
}

// Where each weight of a decoder layer goes in LayerWeights (the table,
// format/hf_tensors.hpp, says which a layer has, their names and shapes).
QMatrix* matrix_of(LayerWeights& L, Weight w) {
  switch (w) {
    case Weight::q_a: return &L.attn.q_a;
    case Weight::q_b: return &L.attn.q_b;
    case Weight::q: return &L.attn.q;
    case Weight::kv_a: return &L.attn.kv_a;
    case Weight::kv_b: return &L.attn.kv_b;
    case Weight::o: return &L.attn.o;
    case Weight::mlp_gate: return &L.mlp.gate;
    case Weight::mlp_up: return &L.mlp.up;
    case Weight::mlp_down: return &L.mlp.down;
    case Weight::router: return &L.moe.gate;
    case Weight::shared_gate: return &L.moe.shared.gate;
    case Weight::shared_up: return &L.moe.shared.up;
    case Weight::shared_down: return &L.moe.shared.down;
    default: throw Error(std::string("load_layer: no field for the matrix ") + hf_name(w, L.layer));
  }
}

VecView* vector_of(LayerWeights& L, Weight w) {
  switch (w) {
    case Weight::input_norm: return &L.input_norm;
    case Weight::post_attn_norm: return &L.post_attn_norm;
    case Weight::q_a_norm: return &L.attn.q_a_norm;
    case Weight::kv_a_norm: return &L.attn.kv_a_norm;
    case Weight::router_bias: return &L.moe.bias;
    default: throw Error(std::string("load_layer: no field for the vector ") + hf_name(w, L.layer));
  }
}

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

VecView load_vector(TensorSource& src, const WeightSpec& w) { return load_vector(src, w.name, w.out); }
QMatrix load_linear(TensorSource& src, const WeightSpec& w) { return load_linear(src, w.name, w.out, w.in); }

MlpWeights load_expert(const ModelConfig& cfg, TensorSource& src, int64_t layer, int64_t expert) {
  const std::vector<WeightSpec> w = expert_weights(cfg, layer, expert);  // gate, up, down
  return MlpWeights{load_linear(src, w.at(0)), load_linear(src, w.at(1)), load_linear(src, w.at(2))};
}

LayerWeights load_layer(const ModelConfig& cfg, TensorSource& src, int64_t l) {
  LayerWeights L;
  L.layer = l;
  L.is_moe = cfg.is_moe_layer(l);
  L.attn.has_q_lora = cfg.q_lora_rank.has_value();
  L.moe.has_shared = L.is_moe && cfg.n_shared_experts > 0;
  for (const WeightSpec& w : layer_weights(cfg, l)) {
    if (w.is_matrix())
      *matrix_of(L, w.weight) = load_linear(src, w);
    else
      *vector_of(L, w.weight) = load_vector(src, w);
  }
  return L;
}

ModelWeights ModelWeights::load(const ModelConfig& cfg, const LayerRange& range, TensorSource& src) {
  if (range.begin < 0 || range.end > cfg.num_hidden_layers || range.begin > range.end)
    throw ConfigError("layer range [" + std::to_string(range.begin) + ", " + std::to_string(range.end) +
                      ") outside the model's " + std::to_string(cfg.num_hidden_layers) + " layers");
  ModelWeights w;
  if (range.has_embed) w.embed = load_linear(src, embed_weight(cfg));
  if (range.head_split < 0 || range.head_split >= cfg.vocab_size)
    throw ConfigError("head split " + std::to_string(range.head_split) + " outside the vocabulary's " +
                      std::to_string(cfg.vocab_size) + " rows");
  const std::vector<WeightSpec> head = head_weights(cfg);  // final norm, lm_head
  if (range.has_head) w.final_norm = load_vector(src, head.at(0));
  if (range.holds_head_rows()) {
    // A view of the held rows: mapped weights, so the other rows' pages are never touched.
    const int64_t b = range.head_begin(), e = range.head_end(cfg.vocab_size);
    w.lm_head = load_linear(src, head.at(1)).row_range(b, e - b);
  }
  for (int64_t l = range.begin; l < range.end; ++l) w.layers.push_back(load_layer(cfg, src, l));
  return w;
}

}  // namespace trillion
