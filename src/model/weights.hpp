// The weights of the layers a rank holds, as views into the TensorSource's
// memory (mmap'd shards; nothing copied). The table of the architecture's
// weights (format/hf_tensors.hpp: names and shapes) is iterated here and
// each weight put in its field. Shapes use d = hidden_size,
// H = num_attention_heads, nope/rope/v = qk_nope/qk_rope/v_head_dim,
// r = kv_lora_rank, E = n_routed_experts.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/tensor_view.hpp"
#include "config/model_config.hpp"
#include "format/hf_tensors.hpp"
#include "kernels/qmatrix.hpp"
#include "kernels/vector_ops.hpp"
#include "config/layer_range.hpp"

namespace trillion {

// A SwiGLU MLP: down(silu(gate x) * up x). Dense layers, shared experts, and
// each routed expert.
struct MlpWeights {
  QMatrix gate;  // [width, d]
  QMatrix up;    // [width, d]
  QMatrix down;  // [d, width]
};

struct AttentionWeights {
  bool has_q_lora = false;
  QMatrix q_a;        // [q_lora_rank, d]              (has_q_lora)
  VecView q_a_norm;   // [q_lora_rank]                 (has_q_lora)
  QMatrix q_b;        // [H*(nope+rope), q_lora_rank]  (has_q_lora)
  QMatrix q;          // [H*(nope+rope), d]            (!has_q_lora)
  QMatrix kv_a;       // [r + rope, d]: rows [0, r) c_kv, then k_pe
  VecView kv_a_norm;  // [r]
  QMatrix kv_b;       // [H*(nope+v), r]: head h rows [h*(nope+v), +nope) W_UK, next v rows W_UV
  QMatrix o;          // [d, H*v]
};

struct MoeWeights {
  QMatrix gate;          // [E, d] router
  VecView bias;          // [E] e_score_correction_bias
  bool has_shared = false;
  MlpWeights shared;     // width n_shared_experts * moe_intermediate_size (has_shared)
};

struct LayerWeights {
  int64_t layer = 0;        // global index
  VecView input_norm;       // [d]
  VecView post_attn_norm;   // [d]
  AttentionWeights attn;
  bool is_moe = false;
  MlpWeights mlp;           // dense layers: width intermediate_size
  MoeWeights moe;           // MoE layers (routed experts: load_expert)
};

struct ModelWeights {
  QMatrix embed;            // [vocab, d]  (range.has_embed)
  VecView final_norm;       // [d]         (range.has_head)
  QMatrix lm_head;          // [rows, d]: lm_head rows [range.head_begin(), range.head_end(vocab))
  std::vector<LayerWeights> layers;  // [range.size()], layers[i] is layer range.begin + i

  // Throws FormatError naming the tensor when one is missing or has the wrong
  // dtype or shape; ConfigError when the range exceeds the config.
  static ModelWeights load(const ModelConfig& cfg, const LayerRange& range, TensorSource& source);
};

// Decoder layer `layer` without its routed experts (main layers, and the MTP
// layer at index num_hidden_layers, which has the same tensors).
LayerWeights load_layer(const ModelConfig& cfg, TensorSource& source, int64_t layer);

// A norm's weight vector (BF16 or F32) checked to be [size].
VecView load_vector(TensorSource& source, const std::string& name, int64_t size);

// Routed expert `expert` of MoE layer `layer`: width moe_intermediate_size.
MlpWeights load_expert(const ModelConfig& cfg, TensorSource& source, int64_t layer, int64_t expert);

// A weight of the table by its name and shape (a vector, a matrix).
VecView load_vector(TensorSource& source, const WeightSpec& w);
QMatrix load_linear(TensorSource& source, const WeightSpec& w);

// A linear layer `prefix` (".weight", or FP8 ".weight" + ".weight_scale_inv",
// or INT4 ".weight_packed" + ".weight_scale", or INT8 I8 ".weight" +
// ".weight_scale" BF16 [rows, ceil(cols/32)]) checked to be [rows, cols].
QMatrix load_linear(TensorSource& source, const std::string& prefix, int64_t rows, int64_t cols);

}  // namespace trillion
