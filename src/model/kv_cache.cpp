#include "model/kv_cache.hpp"

#include <string>

#include "common/error.hpp"

namespace trillion {

KvCache::KvCache(const ModelConfig& cfg, const LayerRange& range, int32_t slots, int32_t max_len)
    : kv_lora_(cfg.kv_lora_rank), rope_(cfg.qk_rope_head_dim), layer0_(range.begin), layers_(range.size()),
      slots_(slots), max_len_(max_len) {
  if (slots < 0 || max_len < 0 || layers_ < 0)
    throw Error("KvCache: negative size (slots " + std::to_string(slots) + ", max_len " +
                std::to_string(max_len) + ")");
  const size_t rows = size_t(slots) * size_t(layers_) * size_t(max_len);
  c_kv_.assign(rows * size_t(kv_lora_), 0.0f);
  k_pe_.assign(rows * size_t(rope_), 0.0f);
}

int64_t KvCache::bytes() const { return int64_t((c_kv_.size() + k_pe_.size()) * sizeof(float)); }

size_t KvCache::index(int32_t slot, int64_t layer) const {
  if (slot < 0 || slot >= slots_ || layer < layer0_ || layer >= layer0_ + layers_)
    throw Error("KvCache: slot " + std::to_string(slot) + " of " + std::to_string(slots_) + ", layer " +
                std::to_string(layer) + " not held (layers " + std::to_string(layer0_) + ".." +
                std::to_string(layer0_ + layers_ - 1) + ")");
  return (size_t(slot) * size_t(layers_) + size_t(layer - layer0_)) * size_t(max_len_);
}

float* KvCache::c_kv(int32_t slot, int64_t layer) { return c_kv_.data() + index(slot, layer) * size_t(kv_lora_); }
float* KvCache::k_pe(int32_t slot, int64_t layer) { return k_pe_.data() + index(slot, layer) * size_t(rope_); }
const float* KvCache::c_kv(int32_t slot, int64_t layer) const {
  return c_kv_.data() + index(slot, layer) * size_t(kv_lora_);
}
const float* KvCache::k_pe(int32_t slot, int64_t layer) const {
  return k_pe_.data() + index(slot, layer) * size_t(rope_);
}

}  // namespace trillion
