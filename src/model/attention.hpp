// MLA attention (DeepSeek-V2/V3) in the absorbed form, for every row: prefill
// and decode run the same code, so a token's bits never depend on which it was.
#pragma once
#include <cstdint>

#include "config/model_config.hpp"
#include "model/step.hpp"
#include "model/weights.hpp"

namespace trillion {

// out[n, d] = MLA(x[n, d]) of layer `layer` (x already input_layernorm'ed):
//   q = q_b(RMSNorm(q_a x)) (or q_proj x), per head [q_nope | q_pe];
//   [c_kv | k_pe] = kv_a x; c_kv = RMSNorm(c_kv); rope on q_pe and k_pe;
//   every row's c_kv, k_pe written to the cache at (slot, pos) first; then per
//   row and head: q_lat = W_UK^T q_nope, score_j = (q_lat . c_kv_j + q_pe . k_pe_j)
//   * softmax_scale for j <= pos, p = softmax(score), ctx = sum_j p_j c_kv_j,
//   o_h = W_UV ctx; out = o_proj [o_1 .. o_H].
// Threads split heads (and output rows inside the projections), never a reduction.
void attention_forward(const ModelConfig& cfg, const AttentionWeights& w, int64_t layer, const Step& step,
                       const float* x, float* out);

}  // namespace trillion
