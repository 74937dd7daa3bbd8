#include "plan/model_cost.hpp"

#include <cmath>

#include "common/error.hpp"
#include "format/hf_tensors.hpp"
#include "store/int8_source.hpp"
#include "store/manifest.hpp"

namespace trillion {
namespace {

// A linear layer's stored tensors (by prefix) as one matrix call on path `act`.
MatrixCost matrix(const Manifest& man, const std::string& prefix, Activations act, bool exact = false) {
  MatrixCost m;
  m.name = prefix;
  const std::string fmts[] = {".weight", ".weight_packed"};
  const TensorInfo* w = nullptr;
  for (const auto& f : fmts)
    if ((w = man.find_tensor(prefix + f))) break;
  if (!w) throw ConfigError("the model has no tensor '" + prefix + ".weight'");
  std::string format;
  switch (w->dtype) {
    case DType::BF16: format = "bf16"; break;
    case DType::F8_E4M3: format = "fp8"; break;
    case DType::I32: format = "int4"; break;
    case DType::I8: format = "int8"; break;
    case DType::F32: format = "f32"; break;
    default: throw ConfigError("tensor '" + w->name + "' has a dtype no matmul reads");
  }
  const std::vector<int64_t>& shape = w->weight_shape.empty() ? w->shape : w->weight_shape;
  m.rows = shape.at(0);
  m.cols = shape.at(1);
  m.bytes = int64_t(w->nbytes);
  for (const char* s : {".weight_scale_inv", ".weight_scale"})
    if (const TensorInfo* t = man.find_tensor(prefix + s)) m.bytes += int64_t(t->nbytes);
  // model/linear.hpp: int8 runs INT8/INT4 on the integer-dot kernels, and an
  // FP8 model's linears on its int8 copy (store/int8_source.hpp
  // int8_copy_holds: kv_b_proj excepted, it is used per head on the exact
  // path; the BF16 lm_head included); other BF16 stays float.
  const bool int8 = act == Activations::int8 && !exact;
  if (int8 && man.weight_format == WeightFormat::fp8_block && int8_copy_holds(w->name, w->dtype)) {
    format = "int8";
    m.bytes = int64_t(quantized_bytes(WeightFormat::int8_group, m.rows, m.cols));
  }
  // bf16 runs FP8 linears in place on kernels/matmul_bf16 (kv_b excepted, as
  // above: the same bytes, no copy); every other format stays float.
  const bool bf16 = act == Activations::bf16 && !exact && format == "fp8";
  m.kernel = format + "/" + (int8 && (format == "int8" || format == "int4") ? "int8" : bf16 ? "bf16" : "f32");
  return m;
}

int64_t tensor_bytes(const Manifest& man, const std::string& name) {
  const TensorInfo* t = man.find_tensor(name);
  return t ? int64_t(t->nbytes) : 0;
}

}  // namespace

int64_t LayerCost::expert_bytes() const {
  int64_t b = 0;
  for (const auto& m : expert) b += m.bytes;
  return b;
}

int64_t LayerCost::dense_bytes() const {
  int64_t b = other_bytes + router.bytes;
  for (const auto& m : attention) b += m.bytes;
  for (const auto& m : mlp) b += m.bytes;
  return b;
}

int64_t ModelCost::bytes_per_token() const {
  int64_t b = lm_head.bytes + embed_row_bytes;
  for (const auto& l : layers) b += l.dense_bytes() + (l.moe ? top_k * l.expert_bytes() : 0);
  return b;
}

ModelCost model_cost(const ModelConfig& cfg, const Manifest& man, Activations act) {
  ModelCost c;
  c.n_experts = cfg.n_routed_experts;
  c.top_k = cfg.num_experts_per_tok;
  c.hidden = cfg.hidden_size;
  c.heads = cfg.num_attention_heads;
  c.vocab = cfg.vocab_size;
  c.kv_lora_rank = cfg.kv_lora_rank;
  c.rope_dim = cfg.qk_rope_head_dim;
  if (const TensorInfo* e = man.find_tensor(embed_weight(cfg).name + ".weight"))
    c.embed_row_bytes = int64_t(e->nbytes) / std::max<int64_t>(1, cfg.vocab_size);
  c.lm_head = matrix(man, hf_name(Weight::lm_head), act);
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
    LayerCost L;
    L.layer = l;
    L.moe = cfg.is_moe_layer(l);
    for (const WeightSpec& w : layer_weights(cfg, l)) {
      if (!w.is_matrix())
        L.other_bytes += tensor_bytes(man, w.name);  // norms, routing bias
      else if (w.linear == LinearRole::attention)  // W_UK, W_UV are used per head: kv_b on the exact path
        L.attention.push_back(matrix(man, w.name, act, /*exact=*/w.weight == Weight::kv_b));
      else if (w.weight == Weight::router)
        L.router = matrix(man, w.name, act, /*exact=*/true);
      else  // the dense MLP or the shared experts
        L.mlp.push_back(matrix(man, w.name, act));
    }
    // Experts of one layer share their shapes and format: expert 0 stands for all.
    if (L.moe)
      for (const WeightSpec& w : expert_weights(cfg, l, 0)) L.expert.push_back(matrix(man, w.name, act));
    c.layers.push_back(std::move(L));
  }
  return c;
}

double expected_experts_touched(int64_t experts, int64_t k, double tokens) {
  if (experts <= 0 || tokens <= 0) return 0.0;
  const double p = double(std::min(k, experts)) / double(experts);
  return double(experts) * (1.0 - std::pow(1.0 - p, tokens));
}

}  // namespace trillion
