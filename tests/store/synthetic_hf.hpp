// Tiny synthetic Hugging Face checkpoints (docs/checkpoint.md layout) written
// from C++, in each weight format, plus a temporary-directory helper.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "st_writer.hpp"

namespace trillion::test {

// A fresh directory under $TMPDIR, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// config.json of a tiny DeepSeek-V3-shaped model: 3 layers (1 dense, 2 MoE),
// 10 routed experts (so experts_per_shard 4 leaves a partial group), d = 64.
// format: "bf16" | "fp8" | "int4".
nlohmann::json tiny_config(const std::string& format, int mtp_layers = 0);

struct SyntheticOptions {
  int files = 3;             // safetensors files the tensors are spread over (1: model.safetensors, no index)
  bool mtp = false;          // add an MTP layer (index num_hidden_layers) with a few tensors
  // Edits the tensor list before it is written (drop, reshape, retype, add).
  std::function<void(std::vector<StTensor>&)> mutate = nullptr;
};

// Writes config.json, tokenizer files, the safetensors files and the index.
// Returns the tensors written (after `mutate`).
std::vector<StTensor> write_synthetic_checkpoint(const std::string& dir, const nlohmann::json& config,
                                                 const SyntheticOptions& opts = {});

// The MTP tensor names write_synthetic_checkpoint adds for layer `l`.
std::vector<std::string> mtp_tensor_names(int64_t l);

}  // namespace trillion::test
