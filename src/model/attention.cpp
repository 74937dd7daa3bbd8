#include "model/attention.hpp"

#include <algorithm>
#include <vector>

#include "kernels/matmul.hpp"
#include "model/linear.hpp"
#include "model/mla_attend.hpp"
#include "kernels/vector_ops.hpp"

namespace trillion {
namespace {

struct Dims {
  int64_t d, H, nope, rope, v, r, qk;
  explicit Dims(const ModelConfig& c)
      : d(c.hidden_size), H(c.num_attention_heads), nope(c.qk_nope_head_dim), rope(c.qk_rope_head_dim),
        v(c.v_head_dim), r(c.kv_lora_rank), qk(c.qk_nope_head_dim + c.qk_rope_head_dim) {}
};

// q[n, H*qk] = the queries of every head, q_pe roped. q_a [n, q_lora_rank]:
// x . W_qa^T (computed with kv_a, which shares x), consumed here.
std::vector<float> project_queries(const ModelConfig& cfg, const Dims& D, const AttentionWeights& w,
                                   int64_t layer, const Step& step, const float* x, std::vector<float>& q_a) {
  const int64_t n = step.n();
  std::vector<float> q(size_t(n * D.H * D.qk));
  if (w.has_q_lora) {
    const int64_t ql = w.q_a.rows;
    for (int64_t t = 0; t < n; ++t) rmsnorm(&q_a[size_t(t * ql)], w.q_a_norm, cfg.rms_norm_eps, &q_a[size_t(t * ql)]);
    step.dump.dump(layer, "q_a_normed", q_a.data(), {n, ql});
    const PhaseScope timed(step.times, Phase::attn_proj);
    linear(w.q_b, q_a.data(), n, q.data(), step.act, step.pool);
  } else {
    const PhaseScope timed(step.times, Phase::attn_proj);
    linear(w.q, x, n, q.data(), step.act, step.pool);
  }
  const int64_t half = D.rope / 2;
  for (int64_t t = 0; t < n; ++t)
    for (int64_t h = 0; h < D.H; ++h)
      step.rope.apply(&q[size_t((t * D.H + h) * D.qk + D.nope)], step.rope_cos + t * half, step.rope_sin + t * half);
  step.dump.dump(layer, "q", q.data(), {n, D.H, D.qk});
  return q;
}

// Writes each row's normalized latent c_kv [r] and roped shared key k_pe [rope]
// into the cache at (slot, pos). kv [n, r + rope] = x . W_kva^T: [c_kv | k_pe]
// before norm / rope.
void write_cache(const ModelConfig& cfg, const Dims& D, const AttentionWeights& w, int64_t layer,
                 const Step& step, const std::vector<float>& kv) {
  const int64_t n = step.n(), kv_dim = D.r + D.rope, half = D.rope / 2;
  step.dump.dump(layer, "kv_a", kv.data(), {n, kv_dim});
  for (int64_t t = 0; t < n; ++t) {
    const TokenRow row = step.batch.rows[size_t(t)];
    const int64_t in_block = row.pos % KvCache::kBlockTokens;
    float* c_kv = step.cache.c_kv_block(row.slot, layer, row.pos) + in_block * D.r;
    float* k_pe = step.cache.k_pe_block(row.slot, layer, row.pos) + in_block * D.rope;
    rmsnorm(&kv[size_t(t * kv_dim)], w.kv_a_norm, cfg.rms_norm_eps, c_kv);
    std::copy_n(&kv[size_t(t * kv_dim + D.r)], D.rope, k_pe);
    step.rope.apply(k_pe, step.rope_cos + t * half, step.rope_sin + t * half);
  }
}

}  // namespace

void attention_forward(const ModelConfig& cfg, const AttentionWeights& w, int64_t layer, const Step& step,
                       const float* x, float* out) {
  const Dims D(cfg);
  const int64_t n = step.n();
  const float scale = float(cfg.softmax_scale());
  // x feeds kv_a and (with a q LoRA) q_a: on the int8 path one quantization serves both.
  std::vector<float> kv(size_t(n * (D.r + D.rope))), q_a;
  if (w.has_q_lora) {
    q_a.resize(size_t(n * w.q_a.rows));
    const PhaseScope timed(step.times, Phase::attn_proj);
    linear_pair(w.q_a, q_a.data(), w.kv_a, kv.data(), x, n, step.act, &step.pool);
  } else {
    const PhaseScope timed(step.times, Phase::attn_proj);
    linear(w.kv_a, x, n, kv.data(), step.act, step.pool);
  }
  const std::vector<float> q = project_queries(cfg, D, w, layer, step, x, q_a);  // [n, H, nope + rope]
  write_cache(cfg, D, w, layer, step, kv);

  // q_lat [H, n, r] = per head, q_nope . W_UK; then every head's softmax over
  // the cache at once (mla_attend.hpp); then o_h [n, v] = ctx . W_UV^T.
  std::vector<float> q_lat(size_t(D.H * n * D.r)), ctx(size_t(D.H * n * D.r));
  {
    const PhaseScope timed(step.times, Phase::absorbed);
    step.pool.parallel_for(D.H, 1, [&](int64_t h0, int64_t h1) {
      std::vector<float> q_nope(size_t(n * D.nope));
      for (int64_t h = h0; h < h1; ++h) {
        for (int64_t t = 0; t < n; ++t)  // q_nope [n, nope] of head h
          std::copy_n(&q[size_t((t * D.H + h) * D.qk)], D.nope, &q_nope[size_t(t * D.nope)]);
        const QMatrix w_uk = w.kv_b.row_range(h * (D.nope + D.v), D.nope);  // [nope, r]
        matmul_t_serial(w_uk, q_nope.data(), n, &q_lat[size_t(h * n * D.r)]);
      }
    });
  }
  {
    const PhaseScope timed(step.times, Phase::attend);
    mla_attend(MlaShape{D.H, D.r, D.rope, scale}, step.cache, layer, step.batch, q_lat.data(), q.data() + D.nope,
               D.H * D.qk, D.qk, ctx.data(), step.pool);
  }
  std::vector<float> heads(size_t(n * D.H * D.v));  // [n, H*v] per-head outputs, o_proj's input
  {
    const PhaseScope timed(step.times, Phase::absorbed);
    step.pool.parallel_for(D.H, 1, [&](int64_t h0, int64_t h1) {
      for (int64_t h = h0; h < h1; ++h) {
        // W_UV, like W_UK above, stays exact on every path: the absorbed form's
        // per-head products are small, and the reference has no such activation.
        const QMatrix w_uv = w.kv_b.row_range(h * (D.nope + D.v) + D.nope, D.v);  // [v, r]
        matmul_serial(w_uv, &ctx[size_t(h * n * D.r)], n, &heads[size_t(h * D.v)], D.H * D.v);
      }
    });
  }
  step.dump.dump(layer, "attn_heads", heads.data(), {n, D.H * D.v});
  const PhaseScope timed(step.times, Phase::attn_proj);
  linear(w.o, heads.data(), n, out, step.act, step.pool);
}

}  // namespace trillion
