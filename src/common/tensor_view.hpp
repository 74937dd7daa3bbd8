// A read-only view of one stored tensor, pointing into mapped memory.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/dtype.hpp"

namespace trillion {

struct TensorView {
  std::string name;               // HF tensor name
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;  // in place (mmap), never copied
  size_t nbytes = 0;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  template <class T> const T* as() const { return reinterpret_cast<const T*>(data); }
};

// Where the model's weights come from: the HDF5 store at run time, anything
// else in tests. Throws FormatError naming the tensor (and file) when absent.
class TensorSource {
 public:
  virtual ~TensorSource() = default;
  virtual bool has(const std::string& name) const = 0;
  virtual TensorView tensor(const std::string& name) = 0;
};

}  // namespace trillion
