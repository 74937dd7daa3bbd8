#include "model_step.hpp"

#include <algorithm>

#include <sys/resource.h>

#include "arena_copy.hpp"
#include "kernels/matmul_bf16.hpp"
#include "plan/layout.hpp"
#include "platform/process_memory.hpp"
#include "store/manifest.hpp"

namespace trillion::bench {

namespace {

// CPU seconds of the whole process (every thread): with wall time, how busy
// the pool's threads were (waits on dispatch, serial sections, imbalance).
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

int64_t vec_bytes(const VecView& v) { return v.size * (v.dtype == DType::BF16 ? 2 : 4); }
int64_t mlp_bytes(const MlpWeights& m) { return qmatrix_bytes(m.gate) + qmatrix_bytes(m.up) + qmatrix_bytes(m.down); }
int64_t mlp_macs(const MlpWeights& m) { return 3 * m.gate.rows * m.gate.cols; }

}  // namespace

Costs measure_costs(const ModelConfig& cfg, TensorSource& src) {
  const ModelWeights w = ModelWeights::load(cfg, whole_model(cfg), src);
  Costs c;
  auto linear = [&](const QMatrix& m) {
    c.fixed_bytes += qmatrix_bytes(m);
    c.fixed_macs += m.rows * m.cols;
  };
  for (const LayerWeights& L : w.layers) {
    c.fixed_bytes += vec_bytes(L.input_norm) + vec_bytes(L.post_attn_norm);
    const AttentionWeights& a = L.attn;
    if (a.has_q_lora) {
      linear(a.q_a);
      linear(a.q_b);
      c.fixed_bytes += vec_bytes(a.q_a_norm);
    } else {
      linear(a.q);
    }
    linear(a.kv_a);
    linear(a.o);
    c.fixed_bytes += qmatrix_bytes(a.kv_b) + vec_bytes(a.kv_a_norm);
    // kv_b per head: W_UK^T q_nope (nope x r) and W_UV ctx (v x r); counted with attention.
    if (L.is_moe) {
      linear(L.moe.gate);
      c.fixed_bytes += vec_bytes(L.moe.bias);
      if (L.moe.has_shared) {
        c.fixed_bytes += mlp_bytes(L.moe.shared);
        c.fixed_macs += mlp_macs(L.moe.shared);
      }
      const MlpWeights e = load_expert(cfg, src, L.layer, 0);  // every expert of a layer has one format
      c.expert_bytes.push_back(mlp_bytes(e));
      c.expert_macs = mlp_macs(e);
    } else {
      c.fixed_bytes += mlp_bytes(L.mlp);
      c.fixed_macs += mlp_macs(L.mlp);
      c.expert_bytes.push_back(0);
    }
  }
  c.head_bytes = qmatrix_bytes(w.lm_head) + vec_bytes(w.final_norm);
  c.head_macs = w.lm_head.rows * w.lm_head.cols;
  c.embed_row_bytes = qmatrix_bytes(w.embed) / std::max<int64_t>(1, w.embed.rows);
  return c;
}

StepStats Bench::step(const Batch& batch, const std::vector<int32_t>& tokens, KvCache& cache,
                      const std::vector<int64_t>& head_rows, std::vector<int32_t>* next) {
  const int64_t n = batch.size(), d = cfg_.hidden_size, V = cfg_.vocab_size, m = int64_t(head_rows.size());
  x_.resize(size_t(n * d));
  counting_.reset();
  phases_.reset();
  const double cpu0 = cpu_seconds();
  const auto t0 = Clock::now();
  model_.embed(tokens.data(), n, x_.data());
  model_.forward(batch, x_.data(), cache);
  const auto th = Clock::now();
  rows_.resize(size_t(m * d));
  for (int64_t i = 0; i < m; ++i) std::copy_n(&x_[size_t(head_rows[size_t(i)] * d)], d, &rows_[size_t(i * d)]);
  logits_.resize(size_t(m * V));
  if (m) model_.logits(rows_.data(), m, logits_.data());
  StepStats s;
  s.seconds = since(t0);
  s.head_seconds = since(th);
  s.cpu_seconds = cpu_seconds() - cpu0;
  if (next) {
    next->resize(size_t(m));
    for (int64_t i = 0; i < m; ++i) {
      const float* l = &logits_[size_t(i * V)];
      (*next)[size_t(i)] = int32_t(std::max_element(l, l + V) - l);
    }
  }
  s.expert_seconds = counting_.seconds;
  for (size_t i = 0; i < s.phase_seconds.size(); ++i) s.phase_seconds[i] = phases_.seconds(Phase(i));
  s.tokens = n;
  s.distinct_experts = counting_.experts;
  s.weight_bytes = costs_.fixed_bytes + counting_.bytes + (m ? costs_.head_bytes : 0) + n * costs_.embed_row_bytes;
  // Attention over the cache, per row, head and cached position: q_lat . c_kv
  // (r) + q_pe . k_pe (rope) + p c_kv (r); per row and head W_UK^T and W_UV.
  const int64_t H = cfg_.num_attention_heads, r = cfg_.kv_lora_rank, rope = cfg_.qk_rope_head_dim;
  int64_t attn = 0;
  for (const TokenRow& row : batch.rows)
    attn += H * ((int64_t(row.pos) + 1) * (2 * r + rope) + (cfg_.qk_nope_head_dim + cfg_.v_head_dim) * r);
  s.macs = n * costs_.fixed_macs + counting_.macs + m * costs_.head_macs + cfg_.num_hidden_layers * attn;
  return s;
}

namespace {
bool int8_copy_fits_host(const ModelStore& store) {
  const ModelConfig& cfg = store.config();
  const RankShare whole = make_layout(cfg, model_sizes(cfg, store.manifest()), ParallelMode::pipeline, 1).ranks.at(0);
  const int64_t memory = platform::physical_memory_bytes();
  return memory <= 0 || share_int8_copy_bytes(cfg, store.manifest(), whole) < memory;
}
}  // namespace

LoadedModel::LoadedModel(const std::string& dir, ThreadPool& pool, const std::string& activations, bool copied)
    // Checksums off: hashing would stream every tensor once more at first use.
    : store(ModelStore::open(dir, StoreOptions{false})),
      // auto as a one-rank run on this host decides it: on FP8 the int8
      // copy counts as fitting when the whole model's copy is smaller than
      // the host's memory (the run's check, less its KV cache and buffers).
      act(resolve_activations(activations, store->manifest().weight_format, int8_copy_fits_host(*store),
                              bf16_auto_faster())),
      int8(std::make_unique<Int8FromFp8Source>(*store, &pool)),
      weights(requantizes_fp8(act, store->manifest().weight_format) ? static_cast<TensorSource*>(int8.get())
                                                                     : store.get()) {
  if (copied) copy = std::make_unique<ArenaCopy>(*weights), weights = copy.get();
  bench = std::make_unique<Bench>(store->config(), *weights, pool, act);
}

Prompts prompts(int64_t seqs, int64_t len, int64_t vocab) {
  Prompts p;
  for (int64_t s = 0; s < seqs; ++s) {
    for (int64_t pos = 0; pos < len; ++pos) {
      p.batch.rows.push_back({int32_t(s), int32_t(pos)});
      p.tokens.push_back(token_of(s, pos, vocab));
    }
    p.heads.push_back(int64_t(p.batch.rows.size()) - 1);
  }
  return p;
}

}  // namespace trillion::bench
