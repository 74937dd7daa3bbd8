#include "model/kv_cache.hpp"

#include <algorithm>
#include <string>

#include "common/error.hpp"

namespace trillion {

int64_t KvCache::bytes_of(int64_t row_floats, int64_t layers, int64_t blocks) {
  return int64_t(sizeof(float)) * row_floats * layers * blocks * kBlockTokens;
}

int64_t KvCache::pool_bytes(const ModelConfig& cfg, int64_t layers, int64_t blocks) {
  return bytes_of(cfg.kv_lora_rank + cfg.qk_rope_head_dim, layers, blocks);
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
  refs_.assign(size_t(blocks_), 0);
  const size_t rows = size_t(layers_) * size_t(blocks_) * size_t(kBlockTokens);
  // k_pe_ starts 64-byte aligned after c_kv_ (kv_lora_ floats per row).
  const size_t c_kv_floats = (rows * size_t(kv_lora_) + 15) / 16 * 16;
  pages_ = ZeroedPages((c_kv_floats + rows * size_t(rope_)) * sizeof(float));
  c_kv_ = reinterpret_cast<float*>(pages_.data());
  k_pe_ = c_kv_ + c_kv_floats;
}

int64_t KvCache::bytes() const { return bytes_of(kv_lora_ + rope_, layers_, blocks_); }

void KvCache::unref(int32_t block) {
  if (--refs_[size_t(block)] == 0) free_.push_back(block);
}

void KvCache::release(int32_t slot) {
  if (slot < 0 || slot >= slots_) throw Error("KvCache: release of slot " + std::to_string(slot) + " of " +
                                              std::to_string(slots_));
  auto& t = table_[size_t(slot)];
  for (int32_t b : t) unref(b);
  t.clear();
  // Lowest id taken first: the order of the free list then does not depend on release order.
  std::sort(free_.begin(), free_.end(), std::greater<int32_t>());
}

void KvCache::apply(const KvPrefixOp& op) {
  const std::string what = "KvCache: prefix op " + std::to_string(op.kind) + " (slot " + std::to_string(op.slot) +
                           ", block " + std::to_string(op.block) + ", id " + std::to_string(op.id) + "): ";
  if (op.slot < 0 || op.slot >= slots_) throw Error(what + "no such slot");
  auto& t = table_[size_t(op.slot)];
  switch (op.kind) {
    case KvPrefixOp::kKeep: {
      if (op.block < 0 || size_t(op.block) >= t.size()) throw Error(what + "the slot has no such block");
      if (!kept_.emplace(op.id, t[size_t(op.block)]).second) throw Error(what + "the id is already kept");
      ++refs_[size_t(t[size_t(op.block)])];
      return;
    }
    case KvPrefixOp::kShare: {
      if (op.block == 0 && !t.empty()) release(op.slot);  // a new sequence in the slot
      const auto it = kept_.find(op.id);
      if (it == kept_.end()) throw Error(what + "no block is kept under the id");
      if (op.block != int32_t(t.size())) throw Error(what + "shared blocks must extend the table in order");
      t.push_back(it->second);
      ++refs_[size_t(it->second)];
      return;
    }
    case KvPrefixOp::kCopy: {
      if (op.block == 0 && !t.empty()) release(op.slot);  // a new sequence in the slot
      const auto it = kept_.find(op.id);
      if (it == kept_.end()) throw Error(what + "no block is kept under the id");
      if (op.block != int32_t(t.size())) throw Error(what + "a copied block must extend the table in order");
      if (op.rows < 1 || op.rows > kBlockTokens) throw Error(what + "rows outside 1.." + std::to_string(kBlockTokens));
      const int32_t to = take_block(op.slot, op.block * kBlockTokens);
      for (int64_t l = 0; l < layers_; ++l) {
        const size_t src = size_t(l) * size_t(blocks_) + size_t(it->second), dst = size_t(l) * size_t(blocks_) + size_t(to);
        std::copy_n(c_kv_ + src * size_t(kBlockTokens * kv_lora_), size_t(op.rows * kv_lora_),
                    c_kv_ + dst * size_t(kBlockTokens * kv_lora_));
        std::copy_n(k_pe_ + src * size_t(kBlockTokens * rope_), size_t(op.rows * rope_),
                    k_pe_ + dst * size_t(kBlockTokens * rope_));
      }
      t.push_back(to);
      return;
    }
    case KvPrefixOp::kDrop: {
      const auto it = kept_.find(op.id);
      if (it == kept_.end()) throw Error(what + "no block is kept under the id");
      unref(it->second);
      kept_.erase(it);
      std::sort(free_.begin(), free_.end(), std::greater<int32_t>());
      return;
    }
    default:
      throw Error(what + "unknown kind");
  }
}

int32_t KvCache::take_block(int32_t slot, int32_t pos) {
  if (free_.empty())
    throw Error("KV cache pool exhausted: slot " + std::to_string(slot) + " position " + std::to_string(pos) +
                " needs a block and all " + std::to_string(blocks_) + " blocks of " + std::to_string(kBlockTokens) +
                " positions are taken (raise --kv-cache-tokens)");
  const int32_t b = free_.back();
  free_.pop_back();
  refs_[size_t(b)] = 1;
  return b;
}

void KvCache::prepare(const Batch& batch) {
  for (const KvPrefixOp& op : batch.prefix_ops)
    if (op.kind == KvPrefixOp::kKeep) apply(op);
  for (int32_t s : batch.released) release(s);
  for (const KvPrefixOp& op : batch.prefix_ops)
    if (op.kind != KvPrefixOp::kKeep && op.kind != KvPrefixOp::kShare && op.kind != KvPrefixOp::kCopy)
      apply(op);  // drops (and unknown kinds, refused)
  for (const KvPrefixOp& op : batch.prefix_ops)
    if (op.kind == KvPrefixOp::kShare) apply(op);
  for (const KvPrefixOp& op : batch.prefix_ops)
    if (op.kind == KvPrefixOp::kCopy) apply(op);
  for (const TokenRow& r : batch.rows) {
    if (r.slot < 0 || r.slot >= slots_ || r.pos < 0 || r.pos >= max_len_) continue;  // check_rows reports these
    auto& t = table_[size_t(r.slot)];
    if (r.pos == 0 && !t.empty()) release(r.slot);  // a new sequence in a slot that was not released
    const size_t need = size_t(r.pos / kBlockTokens) + 1;
    while (t.size() < need) t.push_back(take_block(r.slot, r.pos));
    if (refs_[size_t(t[need - 1])] != 1)
      throw Error("KvCache: slot " + std::to_string(r.slot) + " position " + std::to_string(r.pos) +
                  " would write a shared (read-only) block");
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
  return c_kv_ + block_index(slot, layer, pos) * size_t(kBlockTokens * kv_lora_);
}
float* KvCache::k_pe_block(int32_t slot, int64_t layer, int32_t pos) {
  return k_pe_ + block_index(slot, layer, pos) * size_t(kBlockTokens * rope_);
}
const float* KvCache::c_kv_block(int32_t slot, int64_t layer, int32_t pos) const {
  return c_kv_ + block_index(slot, layer, pos) * size_t(kBlockTokens * kv_lora_);
}
const float* KvCache::k_pe_block(int32_t slot, int64_t layer, int32_t pos) const {
  return k_pe_ + block_index(slot, layer, pos) * size_t(kBlockTokens * rope_);
}

}  // namespace trillion
