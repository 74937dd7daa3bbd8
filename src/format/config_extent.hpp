// config.json's counts (num_hidden_layers, n_routed_experts) against the
// tensor names a checkpoint or a converted model actually holds, checked
// before the table of expected tensors (expected_hf_tensors: one row per
// layer and expert) is built. The table costs memory in proportion to what
// the config claims, so a config claiming a million layers must be refused by
// what the files hold, naming the field and the first missing tensor, rather
// than by the kernel's OOM killer.
#pragma once
#include <string>
#include <vector>

#include "config/model_config.hpp"

namespace trillion {

// Throws FormatError "<config_path>: num_hidden_layers is N, but <names_source>
// has no tensor 'model.layers.K.input_layernorm.weight' ..." (likewise
// n_routed_experts for the first MoE layer short of experts). Costs
// O(names.size()), whatever the config says.
void check_config_extent(const ModelConfig& cfg, const std::vector<std::string>& names,
                         const std::string& config_path, const std::string& names_source);

}  // namespace trillion
