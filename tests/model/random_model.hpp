// Tiny DeepSeek-V3-family models with random weights, held in memory in any
// of the three checkpoint formats: the fixtures of the model tests (and of
// any test that needs a model without files).
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "config/model_config.hpp"
#include "model/memory_source.hpp"

namespace trillion::test {

struct TinyModelOptions {
  std::string format = "bf16";  // bf16 | fp8 | int4
  bool q_lora = true;           // false: q_proj instead of q_a/q_b
  int64_t n_group = 4;          // 1: no group-limited routing
  int64_t layers = 3;           // layer 0 dense, the rest MoE
  int64_t hidden = 64;          // e.g. 160: rows and columns past one 128-block (partial FP8 blocks)
};

// config.json of a tiny model: d 64 (opt.hidden), 4 heads (nope 16, rope 8, v 16), kv_lora 32,
// q_lora 48, 16 experts of width 32 top-4 (+1 shared), vocab 97, YaRN factor 40.
nlohmann::json tiny_config_json(const TinyModelOptions& opt = {});
ModelConfig tiny_config(const TinyModelOptions& opt = {});

// Every tensor of cfg's layers (not the MTP layer) with random values, stored
// as cfg.weight_format stores them (docs/checkpoint.md).
void fill_random_model(const ModelConfig& cfg, MemoryTensorSource& source, uint64_t seed);

}  // namespace trillion::test
