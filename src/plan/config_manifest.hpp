// The manifest a conversion of a config.json would write, without the
// checkpoint: every tensor of the table (format/hf_tensors.hpp) with its
// dtype, shape and byte count, in the shard file shard_for() names. `trillion
// plan --config` plans a model before anyone downloads it from this; sizes and
// file names are the converter's own (same table, same shard layout), only
// offsets and checksums are absent (zero).
#pragma once
#include <cstdint>

#include "config/model_config.hpp"
#include "store/manifest.hpp"

namespace trillion {

// Throws ConfigError when the config cannot describe a checkpoint of its format.
Manifest manifest_from_config(const ModelConfig& cfg, int64_t experts_per_shard = 32);

// The config `convert --quantize fmt` would write for a bf16 checkpoint's
// config (quantization_config "trillion": every linear and lm_head in fmt).
// Throws InputError unless cfg is bf16 and fmt is int8, int4 or fp8.
ModelConfig quantized_config(const ModelConfig& cfg, WeightFormat fmt);

}  // namespace trillion
