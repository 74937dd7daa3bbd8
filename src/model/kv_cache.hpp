// The compressed MLA cache: per sequence slot and held layer, the normalized
// latent c_kv [kv_lora_rank] and the roped shared key k_pe [qk_rope_head_dim]
// of every cached position (576 floats per token per layer for DeepSeek-V3).
#pragma once
#include <cstdint>
#include <vector>

#include "config/model_config.hpp"
#include "model/layer_range.hpp"

namespace trillion {

class KvCache {
 public:
  // Slots x max_len positions for the layers of `range`.
  KvCache(const ModelConfig& cfg, const LayerRange& range, int32_t slots, int32_t max_len);

  int32_t slots() const { return slots_; }
  int32_t max_len() const { return max_len_; }
  int64_t bytes() const;

  // [max_len, kv_lora_rank] and [max_len, qk_rope_head_dim] rows of one slot and layer.
  float* c_kv(int32_t slot, int64_t layer);
  float* k_pe(int32_t slot, int64_t layer);
  const float* c_kv(int32_t slot, int64_t layer) const;
  const float* k_pe(int32_t slot, int64_t layer) const;

 private:
  size_t index(int32_t slot, int64_t layer) const;
  int64_t kv_lora_, rope_, layer0_, layers_;
  int32_t slots_, max_len_;
  std::vector<float> c_kv_, k_pe_;  // [slots, layers, max_len, dim]
};

}  // namespace trillion
