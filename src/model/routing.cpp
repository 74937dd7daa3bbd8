#include "model/routing.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace trillion {
namespace {

// A strict total order: larger score first, then lower index; NaN ranks last.
struct Better {
  const std::vector<float>& key;
  bool operator()(int32_t a, int32_t b) const {
    const float ka = key[size_t(a)], kb = key[size_t(b)];
    const bool na = std::isnan(ka), nb = std::isnan(kb);
    if (na != nb) return nb;
    if (!na && ka != kb) return ka > kb;
    return a < b;
  }
};

}  // namespace

void route_token(const ModelConfig& cfg, const float* s, const VecView& bias, int32_t* ids, float* weights) {
  const int64_t E = cfg.n_routed_experts, G = cfg.n_group, per = E / G, k = cfg.num_experts_per_tok;
  std::vector<float> biased(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e) biased[size_t(e)] = s[e] + bias[e];

  std::vector<int32_t> eligible;  // experts of the kept groups, ascending
  eligible.reserve(static_cast<size_t>(E));
  if (G > 1) {
    std::vector<float> group_score(static_cast<size_t>(G));
    for (int64_t g = 0; g < G; ++g) {
      std::vector<int32_t> members(static_cast<size_t>(per));
      std::iota(members.begin(), members.end(), int32_t(g * per));
      std::partial_sort(members.begin(), members.begin() + 2, members.end(), Better{biased});
      group_score[size_t(g)] = biased[size_t(members[0])] + biased[size_t(members[1])];
    }
    std::vector<int32_t> groups(static_cast<size_t>(G));
    std::iota(groups.begin(), groups.end(), 0);
    std::partial_sort(groups.begin(), groups.begin() + cfg.topk_group, groups.end(), Better{group_score});
    std::vector<bool> kept(size_t(G), false);
    for (int64_t i = 0; i < cfg.topk_group; ++i) kept[size_t(groups[size_t(i)])] = true;
    for (int64_t e = 0; e < E; ++e)
      if (kept[size_t(e / per)]) eligible.push_back(int32_t(e));
  } else {
    for (int64_t e = 0; e < E; ++e) eligible.push_back(int32_t(e));
  }

  std::partial_sort(eligible.begin(), eligible.begin() + k, eligible.end(), Better{biased});
  float sum = 0.0f;
  for (int64_t i = 0; i < k; ++i) {
    ids[i] = eligible[size_t(i)];
    weights[i] = s[ids[i]];
    sum += weights[i];
  }
  const float scaling = float(cfg.routed_scaling_factor);
  for (int64_t i = 0; i < k; ++i) weights[i] = (cfg.norm_topk_prob ? weights[i] / sum : weights[i]) * scaling;
}

}  // namespace trillion
