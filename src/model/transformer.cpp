#include "model/transformer.hpp"

#include <map>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "kernels/matmul.hpp"
#include "kernels/vector_ops.hpp"
#include "model/attention.hpp"
#include "model/dump.hpp"
#include "model/local_experts.hpp"
#include "model/mlp.hpp"
#include "model/moe.hpp"
#include "model/rope.hpp"
#include "model/step.hpp"
#include "model/weights.hpp"

namespace trillion {
namespace {

}  // namespace

// out[t] = RMSNorm(x[t]) * w for each of n rows of width w.size.
void rmsnorm_rows(const float* x, int64_t n, const VecView& w, double eps, float* out) {
  for (int64_t t = 0; t < n; ++t) rmsnorm(x + t * w.size, w, eps, out + t * w.size);
}

namespace {

// Refuses rows the cache cannot hold or that break "one slot's rows in increasing pos".
void check_rows(const Batch& batch, const KvCache& cache) {
  std::map<int32_t, int32_t> last_pos;
  for (int64_t i = 0; i < batch.size(); ++i) {
    const TokenRow& r = batch.rows[size_t(i)];
    const std::string where = "batch row " + std::to_string(i) + " (slot " + std::to_string(r.slot) + ", pos " +
                              std::to_string(r.pos) + "): ";
    if (r.slot < 0 || r.slot >= cache.slots())
      throw InputError(where + "slot outside the cache's " + std::to_string(cache.slots()) + " slots");
    if (r.pos < 0 || r.pos >= cache.max_len())
      throw InputError(where + "position outside the cache's " + std::to_string(cache.max_len()) + " positions");
    auto [it, fresh] = last_pos.try_emplace(r.slot, r.pos);
    if (!fresh) {
      if (r.pos <= it->second) throw InputError(where + "positions of one slot must increase");
      it->second = r.pos;
    }
  }
}

}  // namespace

void attention_block(const ModelConfig& cfg, const LayerWeights& layer, const Step& step, float* x, float* h,
                     float* delta) {
  const int64_t l = layer.layer, n = step.n(), d = cfg.hidden_size;
  const double eps = cfg.rms_norm_eps;
  rmsnorm_rows(x, n, layer.input_norm, eps, h);
  attention_forward(cfg, layer.attn, l, step, h, delta);
  step.dump.dump(l, "attn_out", delta, {n, d});
  add(x, delta, n * d);
  rmsnorm_rows(x, n, layer.post_attn_norm, eps, h);
}

void finish_layer(const ModelConfig& cfg, const LayerWeights& layer, const Step& step, float* x, const float* delta) {
  const int64_t l = layer.layer, n = step.n(), d = cfg.hidden_size;
  step.dump.dump(l, "mlp_out", delta, {n, d});
  add(x, delta, n * d);
  step.dump.dump(l, "hidden", x, {n, d});
}

void decoder_layer(const ModelConfig& cfg, const LayerWeights& layer, const Step& step, ExpertBackend& experts,
                   float* x, float* h, float* delta) {
  attention_block(cfg, layer, step, x, h, delta);
  if (layer.is_moe)
    moe_forward(cfg, layer.moe, layer.layer, step, experts, h, delta);
  else {
    const PhaseScope timed(step.times, Phase::dense_mlp);
    mlp_forward(layer.mlp, h, step.n(), delta, step.act, step.pool);
  }
  finish_layer(cfg, layer, step, x, delta);
}

Transformer::Transformer(const ModelConfig& cfg, const LayerRange& range, TensorSource& source, ThreadPool& pool,
                         ExpertBackend* experts, Activations act)
    : cfg_(cfg), range_(range), pool_(pool), act_(act),
      weights_(std::make_unique<ModelWeights>(ModelWeights::load(cfg, range, source))),
      rope_(std::make_unique<Rope>(cfg)), dump_(std::make_unique<Dumper>()), experts_(experts) {
  if (!experts_) {
    owned_experts_ = std::make_unique<LocalExperts>(cfg, range, source, pool, act);
    experts_ = owned_experts_.get();
  }
}

Transformer::~Transformer() = default;

void Transformer::embed(const int32_t* tokens, int64_t n, float* x) const {
  if (!range_.has_embed) throw Error("Transformer::embed: this rank holds no embeddings");
  const int64_t d = cfg_.hidden_size;
  for (int64_t t = 0; t < n; ++t) {
    if (tokens[t] < 0 || tokens[t] >= cfg_.vocab_size)
      throw InputError("token id " + std::to_string(tokens[t]) + " outside the vocabulary [0, " +
                       std::to_string(cfg_.vocab_size) + ")");
    dequantize_row(weights_->embed, tokens[t], x + t * d);
  }
}

void Transformer::forward(const Batch& batch, float* x, KvCache& cache) {
  check_rows(batch, cache);
  cache.prepare(batch);  // even with no rows: released slots return their blocks on every rank
  const int64_t n = batch.size(), d = cfg_.hidden_size, half = cfg_.qk_rope_head_dim / 2;
  if (n == 0) {  // no rows here: the backend still takes its part in each MoE layer (an exchange, in expert mode)
    std::vector<int64_t> moe_layers;
    for (const LayerWeights& layer : weights_->layers)
      if (layer.is_moe) moe_layers.push_back(layer.layer);
    experts_->step_without_rows(moe_layers, groups_, cfg_.num_experts_per_tok, d);
    return;
  }
  if (groups_ > 1) return forward_in_groups(batch, x, cache);
  dump_->next_step();
  std::vector<float> cos(size_t(n * half)), sin(size_t(n * half));  // [n, rope/2]
  for (int64_t t = 0; t < n; ++t) rope_->tables(batch.rows[size_t(t)].pos, &cos[size_t(t * half)], &sin[size_t(t * half)]);
  const Step step{batch, cos.data(), sin.data(), *rope_, cache, pool_, act_, *dump_, phase_times_};
  dump_->dump(-1, "input", x, {n, d});

  std::vector<float> h(size_t(n * d)), delta(size_t(n * d));  // [n, d] normed input, sublayer output
  for (const LayerWeights& layer : weights_->layers) decoder_layer(cfg_, layer, step, *experts_, x, h.data(), delta.data());
}

void Transformer::logits(const float* x, int64_t n, float* out) const {
  const PhaseScope timed(phase_times_, Phase::head);
  std::vector<float> h(size_t(n * cfg_.hidden_size));  // [n, d]
  final_norm(x, n, h.data());
  head(h.data(), n, out);
  dump_->dump(-1, "logits", out, {n, head_rows()});
}

void Transformer::final_norm(const float* x, int64_t n, float* out) const {
  if (!range_.has_head) throw Error("Transformer::final_norm: this rank holds no head");
  rmsnorm_rows(x, n, weights_->final_norm, cfg_.rms_norm_eps, out);
  dump_->dump(-1, "final_norm", out, {n, cfg_.hidden_size});
}

void Transformer::head(const float* h, int64_t n, float* out) const {
  if (!range_.holds_head_rows()) throw Error("Transformer::head: this rank holds no lm_head");
  linear(weights_->lm_head, h, n, out, act_, pool_);
}

}  // namespace trillion
