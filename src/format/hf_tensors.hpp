// The DeepSeek-V3 architecture's tensors as a Hugging Face checkpoint holds
// them, in one table (docs/checkpoint.md, transcribed): every logical weight
// (a linear layer's matrix, a norm, the router and its bias, the embedding,
// the head, the MTP layer's own) with its HF name, its kind and its shape for
// a ModelConfig; and, from it, every tensor a checkpoint of a given format
// stores. The one place that spells HF names: the converter checks a
// checkpoint against the expected tensors, the loader a manifest; the model's
// weights (model/weights.cpp) and MTP layer, plan/'s cost and layout, and the
// int8 copy of FP8 models (store/int8_source.cpp) iterate the weights or ask
// for their names here.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/dtype.hpp"
#include "config/model_config.hpp"

namespace trillion {

// Which shard a tensor lives in (docs/format.md): the token embedding, the
// final norm + lm_head, one decoder layer without its routed experts, a group
// of routed experts of one layer, and the same two for multi-token-prediction
// layers (index >= num_hidden_layers).
enum class TensorRole : uint8_t { embed, head, layer, experts, mtp, mtp_experts };
const char* to_string(TensorRole r);
TensorRole tensor_role_from_string(const std::string& s);  // throws FormatError

// What a linear layer's matrix is, for `convert --quantize` (which rewrites
// exactly these) and its error report; `none` for everything else.
enum class LinearRole : uint8_t { none, attention, dense_mlp, shared_experts, routed_experts, lm_head };
const char* to_string(LinearRole r);

// The logical weights, in the order of the table (hf_tensors.cpp, kNames).
enum class Weight : uint8_t {
  embed, final_norm, lm_head,                                    // the model's two ends
  input_norm, post_attn_norm,                                    // every decoder layer
  q_a, q_a_norm, q_b, q, kv_a, kv_a_norm, kv_b, o,               // MLA attention (q_a..q_b or q)
  mlp_gate, mlp_up, mlp_down,                                    // dense layers' MLP
  router, router_bias, shared_gate, shared_up, shared_down,      // MoE layers
  expert_gate, expert_up, expert_down,                           // one routed expert
  mtp_embed, mtp_enorm, mtp_hnorm, mtp_head_norm, mtp_eh_proj, mtp_head,  // the MTP layer's own
};

// How a weight is stored (docs/checkpoint.md, "Formats of each kind").
enum class WeightKind : uint8_t {
  norm,         // RMSNorm weight [n]: BF16 in every format
  linear,       // LIN: a linear layer outside the routed experts
  expert,       // EXP: a routed expert's linear layer
  bf16_matrix,  // embedding, router (mlp.gate.weight): BF16 in every format
  head,         // lm_head: BF16 in every native format; as a linear layer when requantized
  f32_vector,   // mlp.gate.e_score_correction_bias: F32 in every format
};

// One logical weight of a given config.
struct WeightSpec {
  Weight weight;
  // HF name: a vector's tensor (model.norm.weight); a matrix's prefix, to
  // which its format adds ".weight", ".weight_scale_inv", ... (lm_head).
  std::string name;
  WeightKind kind;
  int64_t out = 0;  // rows; a vector's size
  int64_t in = 0;   // columns (matrices only)
  LinearRole linear = LinearRole::none;
  bool is_matrix() const { return kind != WeightKind::norm && kind != WeightKind::f32_vector; }
};

// The HF name of `w` (as WeightSpec::name) in decoder layer `layer` (the
// MTP layer's: num_hidden_layers) and routed expert `expert`; the model's
// ends ignore both.
std::string hf_name(Weight w, int64_t layer = -1, int64_t expert = -1);

// The weights of the main model, in storage order: the embedding; each
// decoder layer without its routed experts, then each of its routed experts;
// the final norm and lm_head. layer_weights serves the MTP layer's decoder
// block too (layer num_hidden_layers: the same tensors).
WeightSpec embed_weight(const ModelConfig& cfg);
std::vector<WeightSpec> layer_weights(const ModelConfig& cfg, int64_t layer);
std::vector<WeightSpec> expert_weights(const ModelConfig& cfg, int64_t layer, int64_t expert);  // gate, up, down
std::vector<WeightSpec> head_weights(const ModelConfig& cfg);  // final norm, lm_head
// The MTP layer's own weights beside its decoder block (DeepSeek-V3's layer
// num_hidden_layers): its embedding copy (a checkpoint may omit it: the
// model's is the same), enorm, hnorm, shared_head.norm, eh_proj [d, 2d] and
// shared_head.head (a copy of lm_head).
std::vector<WeightSpec> mtp_weights(const ModelConfig& cfg);

struct ExpectedTensor {
  std::string name;              // HF name, e.g. model.layers.7.mlp.experts.40.gate_proj.weight
  std::vector<int64_t> shape;
  std::vector<DType> dtypes;     // accepted; the first is the format's own (weight_shape: I32 or I64)
  TensorRole role = TensorRole::layer;
  int64_t layer = -1;            // decoder layer, -1 for embed/head
  int64_t expert = -1;           // routed expert, -1 otherwise
  // compressed-tensors `weight_shape` ([out, in] as I32[2]): its value is
  // checked and stored as the `weight_shape` attribute of `weight_packed`,
  // not as a dataset.
  bool attribute_only = false;
  // Set on every tensor stored for a linear layer's matrix (.weight and its
  // scales) and on lm_head.weight; none for embedding, norms, router, bias.
  LinearRole linear = LinearRole::none;
};

// Every tensor of the main model (the weights above, each expanded into what
// its format stores) in storage order, for cfg.weight_format. MTP layers are not listed:
// the converter copies them as found. Throws ConfigError when the config
// cannot describe a valid checkpoint of its format (int4 widths not multiples of 32).
// cfg.requantized (converted with --quantize): lm_head and every linear layer
// are in cfg.weight_format; int4 keeps those with in_features % 32 != 0 BF16.
std::vector<ExpectedTensor> expected_hf_tensors(const ModelConfig& cfg);

// Layer and routed-expert index a name refers to (-1 when none): classifies
// tensors that are not in the table (MTP layers, unknown extras).
struct HfNameParts {
  int64_t layer = -1;
  int64_t expert = -1;
};
HfNameParts parse_hf_name(const std::string& name);

// "x.weight_shape" -> "x.weight_packed"; "" for any other name.
std::string packed_name_for_shape(const std::string& name);

// "[64, 128]", the spelling of shapes in error messages.
std::string shape_string(const std::vector<int64_t>& shape);

}  // namespace trillion
