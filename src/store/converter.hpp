// `trillion convert`: a Hugging Face checkpoint directory -> a trillion model
// directory (docs/format.md). Validates everything before writing, copies the
// tensors' bytes unchanged at disk speed, checksums them on the way, and
// publishes the result only when complete.
#pragma once
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "config/model_config.hpp"
#include "store/quantize.hpp"

namespace trillion {

struct ConvertOptions {
  ConvertOptions() = default;
  ConvertOptions(std::string in, std::string out, int64_t eps = 32, bool force_ = false, std::ostream* log_ = nullptr)
      : input_dir(std::move(in)), output_dir(std::move(out)), experts_per_shard(eps), force(force_), log(log_) {}

  std::string input_dir;          // HF checkpoint: config.json, *.safetensors, index, tokenizer files
  std::string output_dir;         // created; must be absent or empty unless `force`
  int64_t experts_per_shard = 32; // routed experts per HDF5 file
  bool force = false;             // replace an existing converted model at output_dir
  std::ostream* log = nullptr;    // warnings and progress (stderr in the CLI); null: silent
  // --quantize: requantize a bf16 checkpoint's linear layers (incl. lm_head)
  // to int8_group, int4_group or fp8_block (docs/format.md "Quantized models").
  std::optional<WeightFormat> quantize;
  int threads = 0;                // quantization threads; <= 0: every core
};

struct ConvertReport {
  int64_t tensors = 0;      // datasets written
  int64_t shards = 0;
  uint64_t bytes = 0;       // tensor bytes written
  uint64_t input_bytes = 0; // tensor bytes read (== bytes unless quantizing)
  double seconds = 0;
  std::vector<std::string> warnings;
  std::vector<std::string> copied_files;  // config.json and tokenizer files
  std::optional<QuantizationReport> quantization;  // with --quantize
};

// Throws ConfigError (config.json), FormatError (checkpoint), InputError
// (output exists; --quantize of a checkpoint that is not bf16), SystemError
// (disk); output_dir is untouched on failure.
ConvertReport convert_checkpoint(const ConvertOptions& opts);

}  // namespace trillion
