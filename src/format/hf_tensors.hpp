// The tensors a Hugging Face checkpoint of a given ModelConfig must hold:
// name, shape, dtype(s) and where the converter stores each one. This table
// (docs/checkpoint.md, transcribed) is the one place that knows HF names; the
// converter checks a checkpoint against it and the loader checks a manifest.
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

// Every tensor of the main model (embedding, layers 0..L-1, final norm,
// lm_head) in storage order, for cfg.weight_format. MTP layers are not listed:
// the converter copies them as found. Throws ConfigError when the config
// cannot describe a valid checkpoint of its format (int4 widths not multiples of 32).
// cfg.requantized (converted with --quantize): lm_head and every linear layer
// are in cfg.weight_format; int4 keeps those with in_features % 32 != 0 BF16.
std::vector<ExpectedTensor> expected_hf_tensors(const ModelConfig& cfg);

// HF names, for code that looks tensors up ("model.layers.7.", "model.layers.7.mlp.experts.40.").
std::string hf_layer_prefix(int64_t layer);
std::string hf_expert_prefix(int64_t layer, int64_t expert);

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
