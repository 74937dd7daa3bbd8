// A converted model directory (docs/format.md), opened for reading. Tensors
// are handed out as views into mmap'd shard files; a shard is opened and
// mapped only when one of its tensors is first asked for, so a rank touches
// only the files of what it holds.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "common/tensor_view.hpp"
#include "config/model_config.hpp"

namespace trillion {

class Manifest;  // store/manifest.hpp

struct StoreOptions {
  bool verify_checksums = true;  // hash each tensor's bytes on first use
};

class ModelStore : public TensorSource {
 public:
  // Reads config.json and manifest.json; throws FormatError/ConfigError naming the file.
  static std::unique_ptr<ModelStore> open(const std::string& dir, StoreOptions opts = {});
  ~ModelStore() override;

  const std::string& dir() const;
  const ModelConfig& config() const;
  const Manifest& manifest() const;

  bool has(const std::string& name) const override;
  // Throws FormatError naming the tensor and the shard file on any mismatch
  // (missing file, wrong size, damaged HDF5, dtype/shape/offset disagreement, checksum).
  TensorView tensor(const std::string& name) override;

  std::vector<std::string> opened_shards() const;  // files mapped so far
  size_t mapped_bytes() const;

 private:
  struct Impl;
  explicit ModelStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace trillion
