// The core of absorbed MLA attention: for every row and head, softmax over
// the row's cached positions of q_lat . c_kv_j + q_pe . k_pe_j, and the
// weighted sum of the latents c_kv_j.
//
// Why its own file and shape: done head by head (as before), every head
// re-reads the row's whole compressed cache, H times the bytes at long
// context (16 heads x 37.7 MB per layer at 16k positions in the bench model).
// Here a work item is (row, chunk of kChunk positions) for all heads at
// once: each 64-position cache block is read once, from memory, and used by
// every head while it sits in L2. A row's chunks carry a local max, sum and
// weighted latent sum (online softmax, as flash-decoding) that are merged in
// chunk order, so a row's bits depend on its own positions and kChunk only:
// never on the batch, the thread count, or which thread took which chunk.
// A row of at most kMlaChunk positions gets exactly the bits of the
// head-by-head softmax (one chunk: the same sums in the same order).
#pragma once
#include <cstdint>

#include "common/thread_pool.hpp"
#include "model/batch.hpp"
#include "model/kv_cache.hpp"

namespace trillion {

struct MlaShape {
  int64_t heads, r, rope;  // H, kv_lora_rank, qk_rope_head_dim
  float scale;             // softmax scale
};

// Positions per work item. Fixed: part of the arithmetic's definition.
constexpr int64_t kMlaChunk = 256;

// q_lat [H, n, r] (head-major: each head's [n, r] is one product's output);
// q_pe of row t, head h at q_pe[t * pe_row + h * pe_head] ([rope] floats);
// ctx [H, n, r] = per head and row, sum_j softmax(score)_j c_kv_j over
// positions 0..pos of the row's slot in `layer`.
void mla_attend(const MlaShape& s, const KvCache& cache, int64_t layer, const Batch& batch, const float* q_lat,
                const float* q_pe, int64_t pe_row, int64_t pe_head, float* ctx, ThreadPool& pool);

}  // namespace trillion
