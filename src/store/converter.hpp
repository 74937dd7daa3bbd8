// `trillion convert`: a Hugging Face checkpoint directory -> a trillion model
// directory (docs/FORMAT.md). Validates everything before writing, copies the
// tensors' bytes unchanged at disk speed, checksums them on the way, and
// publishes the result only when complete.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace trillion {

struct ConvertOptions {
  std::string input_dir;          // HF checkpoint: config.json, *.safetensors, index, tokenizer files
  std::string output_dir;         // created; must be absent or empty unless `force`
  int64_t experts_per_shard = 32; // routed experts per HDF5 file
  bool force = false;             // replace an existing converted model at output_dir
  std::ostream* log = nullptr;    // warnings and progress (stderr in the CLI); null: silent
};

struct ConvertReport {
  int64_t tensors = 0;      // datasets written
  int64_t shards = 0;
  uint64_t bytes = 0;       // tensor bytes copied
  double seconds = 0;
  std::vector<std::string> warnings;
  std::vector<std::string> copied_files;  // config.json and tokenizer files
};

// Throws ConfigError (config.json), FormatError (checkpoint), InputError
// (output exists), SystemError (disk); output_dir is untouched on failure.
ConvertReport convert_checkpoint(const ConvertOptions& opts);

}  // namespace trillion
