// First half of a conversion, before anything is written: checks a Hugging
// Face checkpoint against the table of tensors its config.json implies and
// decides which shard file every tensor goes to, in storage order.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "config/model_config.hpp"
#include "format/hf_checkpoint.hpp"
#include "format/hf_tensors.hpp"
#include "store/shard_layout.hpp"

namespace trillion {

struct PlannedTensor {
  const SafetensorsFile* file = nullptr;
  const SafetensorsEntry* entry = nullptr;
  std::vector<int64_t> weight_shape;  // int4 weight_packed: value of its weight_shape tensor
  LinearRole linear = LinearRole::none;  // from the table: a linear layer's tensor (MTP: none)
};

struct PlannedShard {
  ShardKey key;
  std::vector<PlannedTensor> tensors;
};

struct ConvertPlan {
  std::vector<PlannedShard> shards;  // embed, layers in order (each followed by its experts), head, MTP
  int64_t tensors = 0;
  uint64_t bytes = 0;
  std::vector<std::string> warnings;  // unknown tensors skipped, MTP layers absent, ...
};

// Throws FormatError listing every problem (missing tensor, wrong shape or
// dtype, bad weight_shape value), each naming the tensor and its file.
ConvertPlan plan_conversion(const HfCheckpoint& ckpt, const ModelConfig& cfg, int64_t experts_per_shard);

}  // namespace trillion
