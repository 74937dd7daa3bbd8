#include "model/mla_attend.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/expf.hpp"
#include "kernels/vector_ops.hpp"

namespace trillion {
namespace {

constexpr int64_t kBlock = KvCache::kBlockTokens;
static_assert(kMlaChunk % kBlock == 0, "a chunk is whole cache blocks");
// Partial results held at once (bounds memory for long rows in big batches;
// rows are grouped under it, which changes nothing in any row's arithmetic).
constexpr int64_t kPartialBudgetBytes = int64_t(64) << 20;

struct Item {
  int64_t t;   // row
  int64_t j0;  // first position of the chunk
  int64_t j1;  // one past its last
};

// A chunk's contribution for every head: local max m, l = sum of
// exp(score - m) (double, position order), and acc = sum_j p_j c_kv_j with
// p_j = exp(score_j - m) / l (the chunk's own softmax).
struct Partials {
  std::vector<float> m, acc;  // [items, H], [items, H, r]
  std::vector<double> l;      // [items, H]
};

// Heads [h0, h1) of item `it`: m, l, acc point at the item's head h0.
void run_item(const MlaShape& s, const KvCache& cache, int64_t layer, const Batch& batch, const float* q_lat,
              const float* q_pe, int64_t pe_row, int64_t pe_head, const Item& it, int64_t h0, int64_t h1, int64_t n,
              std::vector<float>& sc, float* m, double* l, float* acc) {
  const TokenRow row = batch.rows[size_t(it.t)];
  const int64_t len = it.j1 - it.j0, nh = h1 - h0, r = s.r, rope = s.rope;
  sc.resize(size_t(nh * kMlaChunk + nh * kBlock));
  float* pe = &sc[size_t(nh * kMlaChunk)];                // [nh, kBlock]: the rope part of a block's scores
  const float* ql = q_lat + (h0 * n + it.t) * r;          // head h0 + h at ql + h * n * r
  const float* qp = q_pe + it.t * pe_row + h0 * pe_head;  // head h0 + h at qp + h * pe_head
  // Scores: block by block, every head of the part against every position while the
  // block is hot, as register tiles (dot_tile: dot's bits per score).
  for (int64_t b0 = it.j0; b0 < it.j1; b0 += kBlock) {
    const float* c_kv = cache.c_kv_block(row.slot, layer, int32_t(b0));  // [kBlock, r]
    const float* k_pe = cache.k_pe_block(row.slot, layer, int32_t(b0));  // [kBlock, rope]
    const int64_t nb = std::min(kBlock, it.j1 - b0);
    float* out = &sc[size_t(b0 - it.j0)];
    // The chunk's next block, for the tiles to prefetch while they compute
    // (blocks come from a pool: not contiguous).
    const bool more = b0 + kBlock < it.j1;
    const float* c_kv_next = more ? cache.c_kv_block(row.slot, layer, int32_t(b0 + kBlock)) : nullptr;
    const float* k_pe_next = more ? cache.k_pe_block(row.slot, layer, int32_t(b0 + kBlock)) : nullptr;
    dot_tile(ql, n * r, nh, c_kv, r, nb, r, out, kMlaChunk, c_kv_next);
    dot_tile(qp, pe_head, nh, k_pe, rope, nb, rope, pe, kBlock, k_pe_next);
    for (int64_t h = 0; h < nh; ++h)
      for (int64_t j = 0; j < nb; ++j) out[h * kMlaChunk + j] = (out[h * kMlaChunk + j] + pe[h * kBlock + j]) * s.scale;
  }
  // Normalized within the chunk by vector_ops' own softmax, so a row of one
  // chunk (<= kMlaChunk positions) keeps the bits it had when attention went
  // head by head.
  softmax_stats_rows(sc.data(), kMlaChunk, nh, len, m, l);
  std::fill_n(acc, nh * r, 0.0f);
  for (int64_t b0 = it.j0; b0 < it.j1; b0 += kBlock) {
    const float* c_kv = cache.c_kv_block(row.slot, layer, int32_t(b0));
    const int64_t nb = std::min(kBlock, it.j1 - b0);
    // acc_h += p_hj c_kv_j for every head, positions in order (axpy_tile: axpy's bits).
    axpy_tile(&sc[size_t(b0 - it.j0)], kMlaChunk, nh, c_kv, r, nb, acc, r, r);
  }
}

// ctx of row t from its chunks [c0, c1), merged in chunk order.
void merge_row(const MlaShape& s, const Partials& P, int64_t c0, int64_t c1, int64_t t, int64_t n, float* ctx) {
  const int64_t H = s.heads, r = s.r;
  for (int64_t h = 0; h < H; ++h) {
    float M = P.m[size_t(c0 * H + h)];
    for (int64_t c = c0 + 1; c < c1; ++c) M = std::max(M, P.m[size_t(c * H + h)]);
    double L = 0.0;
    for (int64_t c = c0; c < c1; ++c) L += double(exp_f32(P.m[size_t(c * H + h)] - M)) * P.l[size_t(c * H + h)];
    float* out = ctx + (h * n + t) * r;
    if (c1 - c0 == 1) {  // one chunk: its convex combination is the row's
      std::copy_n(&P.acc[size_t((c0 * H + h) * r)], r, out);
      continue;
    }
    std::fill_n(out, r, 0.0f);
    for (int64_t c = c0; c < c1; ++c) {  // chunk c's share of the softmax mass
      const float w = float(double(exp_f32(P.m[size_t(c * H + h)] - M)) * P.l[size_t(c * H + h)] / L);
      axpy(w, &P.acc[size_t((c * H + h) * r)], out, r);
    }
  }
}

}  // namespace

void mla_attend(const MlaShape& s, const KvCache& cache, int64_t layer, const Batch& batch, const float* q_lat,
                const float* q_pe, int64_t pe_row, int64_t pe_head, float* ctx, ThreadPool& pool) {
  const int64_t n = batch.size(), H = s.heads, r = s.r;
  const int64_t item_bytes = H * (r * int64_t(sizeof(float)) + int64_t(sizeof(float) + sizeof(double)));
  const int64_t max_items = std::max<int64_t>(1, kPartialBudgetBytes / item_bytes);
  Partials P;
  std::vector<Item> items;
  std::vector<int64_t> first;  // [rows of the group + 1]: each row's first item
  for (int64_t t0 = 0; t0 < n;) {
    // A group of rows whose chunks fit the budget (at least one row).
    items.clear();
    first.assign(1, 0);
    int64_t t1 = t0;
    while (t1 < n) {
      const int64_t len = int64_t(batch.rows[size_t(t1)].pos) + 1;
      const int64_t chunks = (len + kMlaChunk - 1) / kMlaChunk;
      if (t1 > t0 && int64_t(items.size()) + chunks > max_items) break;
      for (int64_t j0 = 0; j0 < len; j0 += kMlaChunk) items.push_back({t1, j0, std::min(len, j0 + kMlaChunk)});
      first.push_back(int64_t(items.size()));
      ++t1;
    }
    const int64_t ni = int64_t(items.size());
    P.m.resize(size_t(ni * H));
    P.l.resize(size_t(ni * H));
    P.acc.resize(size_t(ni * H * r));
    // Fewer items than threads (short rows, small batches: decode at batch
    // 1 has one): each item's heads are split into parts so every thread
    // gets work. Heads are independent, and dot_tile / axpy_tile give each
    // output the same bits in any tile, so the parts change no bit; each
    // part re-reads the chunk's cache, which is why items are not split
    // when there are enough of them.
    const int64_t parts = ni < pool.size() ? std::min(H, (pool.size() + ni - 1) / ni) : 1;
    pool.parallel_for(ni * parts, 1, [&](int64_t u0, int64_t u1) {
      std::vector<float> sc;
      for (int64_t u = u0; u < u1; ++u) {
        const int64_t i = u / parts, k = u % parts, h0 = H * k / parts, h1 = H * (k + 1) / parts;
        run_item(s, cache, layer, batch, q_lat, q_pe, pe_row, pe_head, items[size_t(i)], h0, h1, n, sc,
                 &P.m[size_t(i * H + h0)], &P.l[size_t(i * H + h0)], &P.acc[size_t((i * H + h0) * r)]);
      }
    });
    pool.parallel_for(t1 - t0, 1, [&](int64_t a, int64_t b) {
      for (int64_t k = a; k < b; ++k) merge_row(s, P, first[size_t(k)], first[size_t(k + 1)], t0 + k, n, ctx);
    });
    t0 = t1;
  }
}

}  // namespace trillion
