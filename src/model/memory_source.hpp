// A TensorSource over tensors held in memory: tests build models with it
// (random weights in any format) without files.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "common/tensor_view.hpp"

namespace trillion {

class MemoryTensorSource : public TensorSource {
 public:
  // Copies `bytes` (numel * dtype_size bytes, C order, little-endian).
  void add(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* bytes);

  bool has(const std::string& name) const override;
  TensorView tensor(const std::string& name) override;  // throws FormatError when absent
  std::vector<std::string> names() const;

 private:
  struct Entry {
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<std::byte> bytes;
  };
  std::map<std::string, Entry> tensors_;
};

}  // namespace trillion
