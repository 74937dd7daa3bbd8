// The compressed MLA cache: for each held layer, the normalized latent c_kv
// [kv_lora_rank] and the roped shared key k_pe [qk_rope_head_dim] of every
// cached position (576 floats per token per layer for DeepSeek-V3).
//
// Paged: storage is a pool of blocks of kBlockTokens positions (one block
// holds those positions for every held layer), and each sequence slot has a
// block table. A slot takes a block when a row first writes a position in
// it and gives all back when its sequence is released (or a new sequence
// starts in the slot at position 0). So total memory is set by the pool size,
// not by slots x context.
//
// Allocation is a pure function of the batches seen (prefix ops and released
// slots, then rows in order, lowest free block first): every rank holding a
// part of the same cache (pipeline stages) gets identical block tables from
// the same steps.
//
// Shared prefixes: a block is reference-counted (each table holding it, and
// its kept id if it has one) and returns to the pool when the last holder
// lets go. A shared block is read-only: a row that would write a block
// someone else holds is refused (Error), so a sharing bug cannot corrupt
// another sequence's cache silently; a match that ends inside a block takes
// a copy of the block's first rows instead (kCopy).
//
// The pool is never cleared, by construction: its pages come from the
// kernel untouched (common/zeroed_pages.hpp), so start-up does not grow with
// the pool, and a block returned to the pool keeps its last holder's rows.
// Neither is ever read: attention reads positions [0, pos] of a row's own
// slot (mla_attend.cpp), and each of them was written before it is read —
// position pos by the row itself (attention.cpp writes every row's latent
// before any row attends), every earlier one by an earlier row of the
// sequence (in an earlier step or in this one), by the block a kShare
// gave it (written by the sequence that kept it), or by a kCopy's first rows
// (which are rows its source had written). A table only ever holds the
// blocks of positions its sequence has reached.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "common/zeroed_pages.hpp"

#include "config/model_config.hpp"
#include "model/batch.hpp"
#include "model/kv_pools.hpp"
#include "config/layer_range.hpp"

namespace trillion {

class KvCache {
 public:
  static constexpr int32_t kBlockTokens = KvPools::kBlockTokens;

  // Bytes of a pool of `blocks` blocks over `layers` layers.
  static int64_t pool_bytes(const ModelConfig& cfg, int64_t layers, int64_t blocks);

  // Slots x max_len addressable positions for the layers of `range`, backed by
  // KvPools::pool_blocks(slots, max_len, capacity_tokens) blocks.
  KvCache(const ModelConfig& cfg, const LayerRange& range, int32_t slots, int32_t max_len,
          int64_t capacity_tokens = 0);

  int32_t slots() const { return slots_; }
  int32_t max_len() const { return max_len_; }
  int64_t blocks() const { return blocks_; }
  int64_t free_blocks() const { return int64_t(free_.size()); }
  int64_t bytes() const;

  // Before a batch's layers run: applies batch.prefix_ops and frees the
  // blocks of batch.released slots (in the order batch.hpp gives), then gives
  // every row's position a block. Throws Error when the pool runs dry (the
  // scheduler reserves blocks at admission so it never does).
  void prepare(const Batch& batch);
  void release(int32_t slot);
  int64_t kept_blocks() const { return int64_t(kept_.size()); }  // blocks held under an id

  // The [kBlockTokens, dim] rows of the block holding `pos` of a slot in a
  // layer (row pos % kBlockTokens is pos's); the block must be allocated.
  float* c_kv_block(int32_t slot, int64_t layer, int32_t pos);
  float* k_pe_block(int32_t slot, int64_t layer, int32_t pos);
  const float* c_kv_block(int32_t slot, int64_t layer, int32_t pos) const;
  const float* k_pe_block(int32_t slot, int64_t layer, int32_t pos) const;

 private:
  // The pool's size: rows of row_floats floats, kBlockTokens per block and layer.
  static int64_t bytes_of(int64_t row_floats, int64_t layers, int64_t blocks);
  size_t block_index(int32_t slot, int64_t layer, int32_t pos) const;  // (layer, block) in blocks
  void apply(const KvPrefixOp& op);
  void unref(int32_t block);
  int32_t take_block(int32_t slot, int32_t pos);
  int64_t kv_lora_, rope_, layer0_, layers_;
  int32_t slots_, max_len_;
  int64_t blocks_;
  std::vector<std::vector<int32_t>> table_;  // [slot] block ids of positions 0, 64, 128, ...
  std::vector<int32_t> free_;                // free block ids, lowest last (taken first)
  std::vector<int32_t> refs_;                // [blocks] holders: tables and kept ids
  std::unordered_map<int32_t, int32_t> kept_;  // kept id -> block
  ZeroedPages pages_;                         // c_kv_ and k_pe_ (not cleared: see the top)
  float* c_kv_ = nullptr;                     // [layers, blocks, kBlockTokens, kv_lora_]
  float* k_pe_ = nullptr;                     // [layers, blocks, kBlockTokens, rope_]
};

}  // namespace trillion
