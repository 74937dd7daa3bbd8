#include "model/rope.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace trillion {
namespace {

double correction_dim(double rotations, double dim, double base, double orig_max) {
  return dim * std::log(orig_max / (rotations * 2.0 * std::numbers::pi)) / (2.0 * std::log(base));
}

}  // namespace

double yarn_get_mscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

Rope::Rope(const ModelConfig& cfg) : dim_(cfg.qk_rope_head_dim) {
  const int64_t half = dim_ / 2;
  const double base = cfg.rope_theta, dim = double(dim_);
  inv_freq_.resize(size_t(half));
  for (int64_t i = 0; i < half; ++i) inv_freq_[size_t(i)] = 1.0 / std::pow(base, double(2 * i) / dim);
  if (!cfg.rope_scaling) return;
  const RopeScaling& s = *cfg.rope_scaling;
  const double orig = double(s.original_max_position_embeddings);
  const double low = std::max(std::floor(correction_dim(s.beta_fast, dim, base, orig)), 0.0);
  double high = std::min(std::ceil(correction_dim(s.beta_slow, dim, base, orig)), dim - 1.0);
  if (low == high) high += 0.001;  // as HF: avoid a zero-width ramp
  for (int64_t i = 0; i < half; ++i) {
    const double extra = inv_freq_[size_t(i)];
    const double inter = 1.0 / (s.factor * std::pow(base, double(2 * i) / dim));
    const double ramp = std::clamp((double(i) - low) / (high - low), 0.0, 1.0);
    inv_freq_[size_t(i)] = inter * ramp + extra * (1.0 - ramp);
  }
  mscale_ = yarn_get_mscale(s.factor, s.mscale) / yarn_get_mscale(s.factor, s.mscale_all_dim);
}

void Rope::tables(int64_t pos, float* cos, float* sin) const {
  for (size_t i = 0; i < inv_freq_.size(); ++i) {
    const double angle = double(pos) * inv_freq_[i];
    cos[i] = float(std::cos(angle) * mscale_);
    sin[i] = float(std::sin(angle) * mscale_);
  }
}

void Rope::apply(float* x, const float* cos, const float* sin) const {
  for (size_t i = 0; i < inv_freq_.size(); ++i) {
    const float a = x[2 * i], b = x[2 * i + 1];
    x[2 * i] = a * cos[i] - b * sin[i];
    x[2 * i + 1] = b * cos[i] + a * sin[i];
  }
}

}  // namespace trillion
