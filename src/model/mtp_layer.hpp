// DeepSeek-V3's multi-token-prediction module (depth 1), layer index
// num_hidden_layers of the checkpoint. Row i (sequence position i) joins the
// main model's final hidden state h_i, after model.norm (as vLLM and SGLang
// feed DeepSeek's MTP weights, and as tools/train/model.py trains it), with
// the embedding of token i+1, and predicts token i+2:
//   x = eh_proj(concat(enorm(emb(t_{i+1})), hnorm(h_i)))
//   x = decoder layer (MLA over the MTP layer's own KV cache, MoE) of x
//   out = shared_head.norm(x)            -> the main lm_head gives the logits.
// The embedding is the MTP layer's own copy (model.layers.N.embed_tokens,
// which DeepSeek's checkpoints and ours store) when present, so the rank that
// holds the head needs no main embedding; shared_head.head, a copy of
// lm_head, is not mapped: the caller applies the main lm_head.
#pragma once
#include <cstdint>
#include <memory>

#include "common/tensor_view.hpp"
#include "common/thread_pool.hpp"
#include "config/model_config.hpp"
#include "model/batch.hpp"
#include "model/kv_cache.hpp"
#include "config/layer_range.hpp"
#include "model/linear.hpp"
#include "kernels/vector_ops.hpp"

namespace trillion {

struct LayerWeights;  // model/weights.hpp
class LocalExperts;   // model/local_experts.hpp
class Rope;           // model/rope.hpp
class Dumper;         // model/dump.hpp

class MtpLayer {
 public:
  // Throws ConfigError when the config has no MTP layer, FormatError when a tensor is missing.
  MtpLayer(const ModelConfig& cfg, TensorSource& source, ThreadPool& pool, Activations act = Activations::f32);
  ~MtpLayer();

  int64_t layer() const { return cfg_.num_hidden_layers; }
  // The layer range of its KV cache (KvCache(cfg, cache_range(), ...)).
  LayerRange cache_range() const { return LayerRange{layer(), layer() + 1, false, false}; }

  // out[n, hidden] = shared_head.norm(MTP(h[n, hidden], next_tokens[n])) for
  // batch rows (slot, pos): row i's h is the main model's normed hidden state
  // at pos, next_tokens[i] the token at pos + 1. Writes the rows' KV to
  // `cache` like Transformer::forward (same row rules).
  void forward(const Batch& batch, const float* h, const int32_t* next_tokens, KvCache& cache, float* out);

  // TRILLION_DUMP (model/dump.hpp) of the step's draft logits [n, vocab]: step-N/layer-L.mtp_logits.npy.
  void dump_logits(const float* logits, int64_t n) const;

 private:
  const ModelConfig& cfg_;
  ThreadPool& pool_;
  Activations act_;
  QMatrix embed_;    // [vocab, d]
  VecView enorm_, hnorm_, head_norm_;
  QMatrix eh_proj_;  // [d, 2d]
  std::unique_ptr<LayerWeights> block_;
  std::unique_ptr<LocalExperts> experts_;  // every routed expert of the MTP layer (it lives where the head does)
  std::unique_ptr<Rope> rope_;
  std::unique_ptr<Dumper> dump_;
};

}  // namespace trillion
