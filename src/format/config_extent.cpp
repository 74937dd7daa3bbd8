#include "format/config_extent.hpp"

#include <unordered_map>
#include <unordered_set>

#include "common/error.hpp"
#include "format/hf_tensors.hpp"

namespace trillion {

namespace {

// The name of an expert's first tensor as the format stores it (docs/checkpoint.md).
std::string first_expert_tensor(const ModelConfig& cfg, int64_t layer, int64_t expert) {
  const bool packed = cfg.weight_format == WeightFormat::int4_group && cfg.hidden_size % 32 == 0;
  return hf_name(Weight::expert_gate, layer, expert) + (packed ? ".weight_packed" : ".weight");
}

}  // namespace

void check_config_extent(const ModelConfig& cfg, const std::vector<std::string>& names,
                         const std::string& config_path, const std::string& names_source) {
  std::unordered_set<int64_t> layers;
  std::unordered_map<int64_t, std::unordered_set<int64_t>> experts;  // layer -> experts with a tensor
  for (const std::string& name : names) {
    const HfNameParts p = parse_hf_name(name);
    if (p.layer < 0) continue;
    layers.insert(p.layer);
    if (p.expert >= 0) experts[p.layer].insert(p.expert);
  }
  // Both loops stop at the first index without tensors, so they run at most
  // names.size() times however large the config's counts are.
  int64_t held = 0;
  while (held < cfg.num_hidden_layers && layers.count(held)) ++held;
  if (held < cfg.num_hidden_layers)
    throw FormatError(config_path + ": num_hidden_layers is " + std::to_string(cfg.num_hidden_layers) + ", but " +
                      names_source + " has no tensor '" + hf_name(Weight::input_norm, held) + "' (" +
                      (held ? "it holds layers 0-" + std::to_string(held - 1) : std::string("it holds no layers")) +
                      ")");
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
    if (!cfg.is_moe_layer(l)) continue;
    const std::unordered_set<int64_t>& have = experts[l];
    int64_t e = 0;
    while (e < cfg.n_routed_experts && have.count(e)) ++e;
    if (e < cfg.n_routed_experts)
      throw FormatError(config_path + ": n_routed_experts is " + std::to_string(cfg.n_routed_experts) + ", but " +
                        names_source + " has no tensor '" + first_expert_tensor(cfg, l, e) + "' (layer " +
                        std::to_string(l) + " holds " + std::to_string(e) + " experts)");
  }
}

}  // namespace trillion
