// A Hugging Face checkpoint directory: config.json, model.safetensors.index.json
// (or one model.safetensors), and the safetensors files the index names.
// Opening it maps and validates every file, so a bad header is reported before
// the converter writes anything.
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "format/safetensors.hpp"

namespace trillion {

class HfCheckpoint {
 public:
  struct Tensor {
    const SafetensorsFile* file = nullptr;
    const SafetensorsEntry* entry = nullptr;
  };

  // Throws FormatError naming the index or safetensors file (and tensor).
  explicit HfCheckpoint(const std::string& dir);

  const std::string& dir() const { return dir_; }
  // The file that says which tensors exist: the index, or model.safetensors.
  // Errors about a missing tensor name it.
  const std::string& index_path() const { return index_path_; }

  // The tensor as the index places it, or nullptr when the checkpoint lacks it.
  const Tensor* find(const std::string& name) const;
  // Every tensor name of the checkpoint, sorted.
  const std::vector<std::string>& names() const { return names_; }
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }
  uint64_t total_bytes() const { return total_bytes_; }  // of all tensors' data

  // Oddities that are not errors (tensors a file holds but the index omits,
  // metadata.total_size disagreeing with the files).
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  void read_index(const std::string& path);
  void read_single(const std::string& path);
  const SafetensorsFile& open_file(const std::string& file_name);

  std::string dir_;
  std::string index_path_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::unordered_map<std::string, size_t> file_index_;  // file name -> files_
  std::unordered_map<std::string, Tensor> tensors_;
  std::vector<std::string> names_;
  uint64_t total_bytes_ = 0;
  std::vector<std::string> warnings_;
};

}  // namespace trillion
