// The DeepSeek-V3 forward pass over the layers one rank holds.
// Reads like the paper: embed -> per layer (norm, MLA attention, residual,
// norm, MLP or MoE, residual) -> final norm -> lm_head. Knows nothing of MPI:
// routed experts go through an ExpertBackend.
#pragma once
#include <cstdint>
#include <memory>

#include "common/tensor_view.hpp"
#include "common/thread_pool.hpp"
#include "config/model_config.hpp"
#include "model/batch.hpp"
#include "model/expert_backend.hpp"
#include "model/kv_cache.hpp"
#include "config/layer_range.hpp"
#include "model/linear.hpp"
#include "model/phase_times.hpp"
#include "config/row_groups.hpp"
#include "kernels/vector_ops.hpp"

namespace trillion {

struct ModelWeights;  // model/weights.hpp
struct LayerWeights;  // model/weights.hpp
struct Step;          // model/step.hpp
class Rope;           // model/rope.hpp
class Dumper;         // model/dump.hpp

// out[t] = RMSNorm(x[t]) * w for each of n rows of width w.size.
void rmsnorm_rows(const float* x, int64_t n, const VecView& w, double eps, float* out);

// decoder_layer's two ends, for the grouped schedule (transformer_groups.cpp):
// attention_block runs the input norm, attention and its residual on x and
// leaves the MLP / MoE input in h; finish_layer adds that block's output
// delta to x.
void attention_block(const ModelConfig& cfg, const LayerWeights& layer, const Step& step, float* x, float* h,
                     float* delta);
void finish_layer(const ModelConfig& cfg, const LayerWeights& layer, const Step& step, float* x, const float* delta);

// One decoder layer in place on x[step.n(), hidden] (norm, MLA attention over
// step.cache, residual, norm, MLP or MoE, residual); h and delta are
// [n, hidden] scratch. The main stack and the MTP layer both run this.
void decoder_layer(const ModelConfig& cfg, const LayerWeights& layer, const Step& step, ExpertBackend& experts,
                   float* x, float* h, float* delta);

class Transformer {
 public:
  // Maps the weights of `range` from `source` (no copies). `experts` computes
  // routed experts; null means LocalExperts over `source` (all experts local,
  // on the same compute path). `act`: the compute path of every weight
  // product but the router's (linear.hpp).
  Transformer(const ModelConfig& cfg, const LayerRange& range, TensorSource& source,
              ThreadPool& pool, ExpertBackend* experts = nullptr, Activations act = Activations::f32);
  ~Transformer();

  const ModelConfig& config() const { return cfg_; }
  const LayerRange& range() const { return range_; }

  // x[n, hidden] = embedding rows of tokens[n]. Needs range().has_embed.
  // Throws InputError for a token id outside [0, vocab_size).
  void embed(const int32_t* tokens, int64_t n, float* x) const;

  // Runs the held layers in place on x[batch.size(), hidden]: first writes every
  // row's c_kv/k_pe into `cache` at (slot, pos), then attends each row over its
  // slot's positions 0..pos (causal). Rows of one slot must be in increasing pos,
  // and positions before a row's first pos in this batch must already be cached.
  void forward(const Batch& batch, float* x, KvCache& cache);

  // Splits each step's rows into `groups` (whole sequences each) that take
  // turns at every MoE layer: while one group's tokens are with the experts'
  // owners, the next group's attention runs, and a group whose combine is
  // done starts the next layer (docs/parallel.md, "Expert parallel"). Only an
  // expert backend that overlaps (RmaExperts) gains; every rank of a run
  // must use the same count, since each group is one exchange. A row's bits
  // do not change: rows never mix inside a kernel. 1 = one group.
  // A step forms at most rows / min_group_rows groups (config/row_groups.hpp says
  // why); the rest stay empty, and still take their turns.
  void set_groups(int groups, int64_t min_group_rows = kMinGroupRows);
  int groups() const { return groups_; }

  // logits[n, head_rows()] = lm_head(norm(x[n, hidden])), the held rows of
  // lm_head (all of them unless the head is split). Needs range().has_head.
  void logits(const float* x, int64_t n, float* out) const;
  // The two halves of logits(): out[n, hidden] = norm(x) (the MTP layer's
  // input h_i; needs has_head), and out[n, head_rows()] = lm_head(h) (also
  // the MTP layer's head; needs holds_head_rows()).
  void final_norm(const float* x, int64_t n, float* out) const;
  void head(const float* h, int64_t n, float* out) const;
  // lm_head rows held: vocab_size, or a split head's share.
  int64_t head_rows() const { return range_.head_end(cfg_.vocab_size) - range_.head_begin(); }

  // Adds each step's time by phase (model/phase_times.hpp) to `times` from
  // now on (forward and logits); null stops. With row groups (set_groups)
  // only the experts' start is timed: their exchange overlaps other groups.
  void time_phases(PhaseTimes* times) { phase_times_ = times; }

 private:
  const ModelConfig& cfg_;
  LayerRange range_;
  ThreadPool& pool_;
  Activations act_;
  std::unique_ptr<ModelWeights> weights_;
  std::unique_ptr<Rope> rope_;
  std::unique_ptr<Dumper> dump_;
  std::unique_ptr<ExpertBackend> owned_experts_;
  ExpertBackend* experts_;
  int groups_ = 1;
  int64_t min_group_rows_ = kMinGroupRows;
  PhaseTimes* phase_times_ = nullptr;

  void forward_in_groups(const Batch& batch, float* x, KvCache& cache);
};

}  // namespace trillion
