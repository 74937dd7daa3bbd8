#include "model/mtp_layer.hpp"

#include <cstring>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "kernels/matmul.hpp"
#include "kernels/vector_ops.hpp"
#include "model/dump.hpp"
#include "model/local_experts.hpp"
#include "model/rope.hpp"
#include "model/step.hpp"
#include "model/transformer.hpp"
#include "model/weights.hpp"

namespace trillion {

MtpLayer::MtpLayer(const ModelConfig& cfg, TensorSource& source, ThreadPool& pool, Activations act)
    : cfg_(cfg), pool_(pool), act_(act) {
  if (cfg.num_nextn_predict_layers < 1)
    throw ConfigError("the model has no MTP layer (num_nextn_predict_layers is 0): --speculative mtp needs one");
  for (const WeightSpec& w : mtp_weights(cfg)) {
    switch (w.weight) {
      case Weight::mtp_embed:  // its own copy when stored, else the model's (the same rows)
        embed_ = load_linear(source, source.has(w.name + ".weight") ? w : embed_weight(cfg));
        break;
      case Weight::mtp_enorm: enorm_ = load_vector(source, w); break;
      case Weight::mtp_hnorm: hnorm_ = load_vector(source, w); break;
      case Weight::mtp_head_norm: head_norm_ = load_vector(source, w); break;
      case Weight::mtp_eh_proj: eh_proj_ = load_linear(source, w); break;
      default: break;  // shared_head.head: the caller applies the main lm_head
    }
  }
  block_ = std::make_unique<LayerWeights>(load_layer(cfg, source, layer()));
  experts_ = std::make_unique<LocalExperts>(cfg, cache_range(), source, pool, act);
  rope_ = std::make_unique<Rope>(cfg);
  dump_ = std::make_unique<Dumper>();
}

MtpLayer::~MtpLayer() = default;

void MtpLayer::forward(const Batch& batch, const float* h, const int32_t* next_tokens, KvCache& cache, float* out) {
  cache.prepare(batch);  // even with no rows: released slots return their blocks
  const int64_t n = batch.size(), d = cfg_.hidden_size, half = cfg_.qk_rope_head_dim / 2;
  if (n == 0) return;
  for (const TokenRow& r : batch.rows)
    if (r.slot < 0 || r.slot >= cache.slots() || r.pos < 0 || r.pos >= cache.max_len())
      throw Error("MtpLayer: row (slot " + std::to_string(r.slot) + ", pos " + std::to_string(r.pos) +
                  ") outside its cache");
  dump_->next_step();
  // x = eh_proj([enorm(emb(t_{i+1})) | hnorm(h_i)]): the embedding half first, as trained.
  std::vector<float> cat(size_t(n * 2 * d));
  std::vector<float> e(static_cast<size_t>(d));
  for (int64_t t = 0; t < n; ++t) {
    if (next_tokens[t] < 0 || next_tokens[t] >= cfg_.vocab_size)
      throw Error("MtpLayer: token " + std::to_string(next_tokens[t]) + " outside the vocabulary");
    dequantize_row(embed_, next_tokens[t], e.data());
    rmsnorm(e.data(), enorm_, cfg_.rms_norm_eps, &cat[size_t(t * 2 * d)]);
    rmsnorm(h + t * d, hnorm_, cfg_.rms_norm_eps, &cat[size_t(t * 2 * d + d)]);
  }
  std::vector<float> x(size_t(n * d));
  linear(eh_proj_, cat.data(), n, x.data(), act_, pool_);
  std::vector<float> cos(size_t(n * half)), sin(size_t(n * half));
  for (int64_t t = 0; t < n; ++t)
    rope_->tables(batch.rows[size_t(t)].pos, &cos[size_t(t * half)], &sin[size_t(t * half)]);
  const Step step{batch, cos.data(), sin.data(), *rope_, cache, pool_, act_, *dump_};
  std::vector<float> hs(size_t(n * d)), delta(size_t(n * d));
  decoder_layer(cfg_, *block_, step, *experts_, x.data(), hs.data(), delta.data());
  rmsnorm_rows(x.data(), n, head_norm_, cfg_.rms_norm_eps, out);
  dump_->dump(layer(), "mtp_out", out, {n, d});
}

void MtpLayer::dump_logits(const float* logits, int64_t n) const {
  dump_->dump(layer(), "mtp_logits", logits, {n, cfg_.vocab_size});
}

}  // namespace trillion
