#include "model/kv_cache.hpp"

#include <algorithm>
#include <string>

#include "common/error.hpp"

namespace trillion {

int64_t KvCache::pool_bytes(const ModelConfig& cfg, int64_t layers, int64_t blocks) {
  return int64_t(sizeof(float)) * (cfg.kv_lora_rank + cfg.qk_rope_head_dim) * layers * blocks * kBlockTokens;
}

KvCache::KvCache(const ModelConfig& cfg, const LayerRange& range, int32_t slots, int32_t max_len,
                 int64_t capacity_tokens)
    : kv_lora_(cfg.kv_lora_rank), rope_(cfg.qk_rope_head_dim), layer0_(range.begin), layers_(range.size()),
      slots_(slots), max_len_(max_len) {
  if (slots < 0 || max_len < 0 || layers_ < 0 || capacity_tokens < 0)
    throw Error("KvCache: negative size (slots " + std::to_string(slots) + ", max_len " +
                std::to_string(max_len) + ", capacity " + std::to_string(capacity_tokens) + ")");
  blocks_ = KvPools::pool_blocks(slots, max_len, capacity_tokens);
  if (blocks_ > INT32_MAX) throw Error("KvCache: too many blocks (" + std::to_string(blocks_) + ")");
  table_.resize(size_t(slots));
  free_.resize(size_t(blocks_));
  for (int64_t b = 0; b < blocks_; ++b) free_[size_t(b)] = int32_t(blocks_ - 1 - b);
  const size_t rows = size_t(layers_) * size_t(blocks_) * size_t(kBlockTokens);
  c_kv_.assign(rows * size_t(kv_lora_), 0.0f);
  k_pe_.assign(rows * size_t(rope_), 0.0f);
}

int64_t KvCache::bytes() const { return int64_t((c_kv_.size() + k_pe_.size()) * sizeof(float)); }

void KvCache::release(int32_t slot) {
  if (slot < 0 || slot >= slots_) throw Error("KvCache: release of slot " + std::to_string(slot) + " of " +
                                              std::to_string(slots_));
  auto& t = table_[size_t(slot)];
  free_.insert(free_.end(), t.begin(), t.end());
  t.clear();
  // Lowest id taken first: the order of the free list then does not depend on release order.
  std::sort(free_.begin(), free_.end(), std::greater<int32_t>());
}

void KvCache::prepare(const Batch& batch) {
  for (int32_t s : batch.released) release(s);
  for (const TokenRow& r : batch.rows) {
    if (r.slot < 0 || r.slot >= slots_ || r.pos < 0 || r.pos >= max_len_) continue;  // check_rows reports these
    auto& t = table_[size_t(r.slot)];
    if (r.pos == 0 && !t.empty()) release(r.slot);  // a new sequence in a slot that was not released
    const size_t need = size_t(r.pos / kBlockTokens) + 1;
    while (t.size() < need) {
      if (free_.empty())
        throw Error("KV cache pool exhausted: slot " + std::to_string(r.slot) + " position " + std::to_string(r.pos) +
                    " needs a block and all " + std::to_string(blocks_) + " blocks of " +
                    std::to_string(kBlockTokens) + " positions are taken (raise --kv-cache-tokens)");
      t.push_back(free_.back());
      free_.pop_back();
    }
  }
}

size_t KvCache::block_index(int32_t slot, int64_t layer, int32_t pos) const {
  if (slot < 0 || slot >= slots_ || layer < layer0_ || layer >= layer0_ + layers_)
    throw Error("KvCache: slot " + std::to_string(slot) + " of " + std::to_string(slots_) + ", layer " +
                std::to_string(layer) + " not held (layers " + std::to_string(layer0_) + ".." +
                std::to_string(layer0_ + layers_ - 1) + ")");
  const auto& t = table_[size_t(slot)];
  const size_t b = size_t(pos) / size_t(kBlockTokens);
  if (pos < 0 || b >= t.size())
    throw Error("KvCache: slot " + std::to_string(slot) + " position " + std::to_string(pos) + " has no block");
  return size_t(layer - layer0_) * size_t(blocks_) + size_t(t[b]);
}

float* KvCache::c_kv_block(int32_t slot, int64_t layer, int32_t pos) {
  return c_kv_.data() + block_index(slot, layer, pos) * size_t(kBlockTokens * kv_lora_);
}
float* KvCache::k_pe_block(int32_t slot, int64_t layer, int32_t pos) {
  return k_pe_.data() + block_index(slot, layer, pos) * size_t(kBlockTokens * rope_);
}
const float* KvCache::c_kv_block(int32_t slot, int64_t layer, int32_t pos) const {
  return c_kv_.data() + block_index(slot, layer, pos) * size_t(kBlockTokens * kv_lora_);
}
const float* KvCache::k_pe_block(int32_t slot, int64_t layer, int32_t pos) const {
  return k_pe_.data() + block_index(slot, layer, pos) * size_t(kBlockTokens * rope_);
}

}  // namespace trillion
