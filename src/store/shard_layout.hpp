// Which shard file a tensor goes to (docs/format.md): a pure function of the
// tensor's role, layer and expert, the config and experts_per_shard, so the
// converter and anything predicting file names agree.
#pragma once
#include <cstdint>
#include <string>

#include "config/model_config.hpp"
#include "format/hf_tensors.hpp"

namespace trillion {

struct ShardKey {
  std::string file;           // "layer-007-experts-032-063.h5"
  TensorRole role = TensorRole::layer;
  int64_t layer = -1;
  int64_t expert_first = -1;  // experts roles: inclusive range
  int64_t expert_last = -1;
};

// `expert` is ignored unless role is experts/mtp_experts; `layer` unless the
// role is in a layer. Throws ConfigError for experts_per_shard < 1.
ShardKey shard_for(TensorRole role, int64_t layer, int64_t expert, const ModelConfig& cfg,
                   int64_t experts_per_shard);

}  // namespace trillion
