// Rotary position embedding of the qk_rope_head_dim dims, with YaRN when
// rope_scaling.type == "yarn" (as HF DeepseekV3YarnRotaryEmbedding):
//   freq_extra[i] = base^(-2i/dim), freq_inter[i] = freq_extra[i] / factor,
//   ramp[i] = clamp((i - low) / (high - low), 0, 1) with
//     low  = max(floor(corr_dim(beta_fast)), 0), high = min(ceil(corr_dim(beta_slow)), dim - 1),
//     corr_dim(n) = dim * ln(orig_max / (n * 2 pi)) / (2 ln base), high += 0.001 if low == high,
//   inv_freq[i] = freq_inter[i] * ramp[i] + freq_extra[i] * (1 - ramp[i]),
//   cos/sin scaled by mscale = get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim).
// Pairs adjacent values: (x[2i], x[2i+1]) rotated by pos * inv_freq[i].
// Angles and tables in double, rounded once to float.
#pragma once
#include <cstdint>
#include <vector>

#include "config/model_config.hpp"

namespace trillion {

class Rope {
 public:
  explicit Rope(const ModelConfig& cfg);

  int64_t dim() const { return dim_; }                         // qk_rope_head_dim
  const std::vector<double>& inv_freq() const { return inv_freq_; }  // [dim/2]
  double mscale() const { return mscale_; }

  // cos[i] = cos(pos * inv_freq[i]) * mscale, sin likewise; i < dim/2.
  void tables(int64_t pos, float* cos, float* sin) const;

  // In place on x[dim]: (x[2i], x[2i+1]) <- (x[2i] c - x[2i+1] s, x[2i+1] c + x[2i] s).
  void apply(float* x, const float* cos, const float* sin) const;

 private:
  int64_t dim_;
  std::vector<double> inv_freq_;
  double mscale_ = 1.0;
};

// get_mscale(scale, mscale) = 1 if scale <= 1 else 0.1 * mscale * ln(scale) + 1.
double yarn_get_mscale(double scale, double mscale);

}  // namespace trillion
