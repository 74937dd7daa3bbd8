// What one step of the model costs, per layer: every weight matrix a token
// passes through with the bytes a call reads and the kernel that runs it
// ("<format>/<path>", the key of a measured rate in a host profile), from the
// manifest's tensors (a converted model's, or manifest_from_config's) and the
// compute path. The speed predictor (predict.hpp) turns these into seconds.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "config/model_config.hpp"
#include "config/activations.hpp"

namespace trillion {

class Manifest;

struct MatrixCost {
  std::string name;    // HF prefix, e.g. model.layers.3.self_attn.o_proj
  std::string kernel;  // "fp8/f32", "int4/int8", ...: which measured rate applies
  int64_t rows = 0, cols = 0;
  int64_t bytes = 0;   // weights + scales one call reads (the int8 copy's for FP8 on int8)
  double flop_per_row() const { return 2.0 * double(rows) * double(cols); }
};

struct LayerCost {
  int64_t layer = 0;
  bool moe = false;
  std::vector<MatrixCost> attention;  // q_a, q_b (or q), kv_a, kv_b (absorbed per head), o: every token
  std::vector<MatrixCost> mlp;        // dense MLP (dense layers) or the shared experts (MoE): every token
  MatrixCost router;                  // MoE: the gate (exact path)
  std::vector<MatrixCost> expert;     // one routed expert (gate, up, down): each token routed to it
  int64_t other_bytes = 0;            // norms, routing bias
  int64_t expert_bytes() const;       // one routed expert
  int64_t dense_bytes() const;        // everything but the routed experts
};

struct ModelCost {
  std::vector<LayerCost> layers;  // main layers 0..L-1
  MatrixCost lm_head;
  int64_t embed_row_bytes = 0;    // one token's embedding row
  int64_t n_experts = 0, top_k = 0, hidden = 0, heads = 0, vocab = 0;
  int64_t kv_lora_rank = 0, rope_dim = 0;
  // Attention over the cache, per token, head and cached position: scores
  // (c_kv and k_pe dot products) and the weighted sum of c_kv, in float32.
  double cache_flop_per_position() const { return double(heads) * (4.0 * double(kv_lora_rank) + 2.0 * double(rope_dim)); }
  // The cache a sequence reads per layer and position (float32 c_kv + k_pe).
  int64_t cache_bytes_per_position() const { return 4 * (kv_lora_rank + rope_dim); }
  // Weight bytes one token reads at batch 1: every dense matrix, top_k experts per MoE layer, lm_head.
  int64_t bytes_per_token() const;
};

// Throws ConfigError when a tensor the config implies is missing from the manifest.
ModelCost model_cost(const ModelConfig& cfg, const Manifest& manifest, Activations act);

// Expected distinct experts among E when `tokens` tokens each choose k
// distinct ones, every expert with probability k/E per token, tokens
// independent: E (1 - (1 - k/E)^tokens). By linearity of expectation this
// holds for any routing that gives each expert the marginal k/E, including
// DeepSeek-V3's group-limited top-k (topk_group of n_group groups) under
// uniform scores: the groups change the variance, not the mean.
double expected_experts_touched(int64_t experts, int64_t k, double tokens);

}  // namespace trillion
