// The MoE router's choice for one token (noaux_tc, sigmoid scoring), a pure
// function of the token's scores: the same decision wherever it is computed.
//   biased = s + e_score_correction_bias
//   n_group > 1: group score = sum of the group's top-2 biased scores; the best
//     topk_group groups are kept (ties: lower group), the others masked
//   ids = the num_experts_per_tok best unmasked experts by biased score, in
//     descending order (ties: lower expert index)
//   weights = the unbiased s of the chosen, divided by their sum when
//     norm_topk_prob, times routed_scaling_factor
// (DeepSeek's inference/model.py; the float64 reference makes the same choices.)
#pragma once
#include <cstdint>

#include "config/model_config.hpp"
#include "kernels/vector_ops.hpp"

namespace trillion {

// s[E] = sigmoid(router logits); bias[E]. Writes ids[k] and weights[k],
// k = num_experts_per_tok. A NaN score ranks below every number.
void route_token(const ModelConfig& cfg, const float* s, const VecView& bias, int32_t* ids, float* weights);

}  // namespace trillion
