#include "model/memory_source.hpp"

#include <cstring>

#include "common/error.hpp"

namespace trillion {

void MemoryTensorSource::add(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* bytes) {
  size_t n = dtype_size(dtype);
  for (int64_t s : shape) n *= size_t(s);
  Entry e{dtype, std::move(shape), std::vector<std::byte>(n)};
  if (n) std::memcpy(e.bytes.data(), bytes, n);
  tensors_[name] = std::move(e);
}

bool MemoryTensorSource::has(const std::string& name) const { return tensors_.count(name) > 0; }

TensorView MemoryTensorSource::tensor(const std::string& name) {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw FormatError(name + ": no such tensor (in-memory source)");
  const Entry& e = it->second;
  return TensorView{name, e.dtype, e.shape, e.bytes.data(), e.bytes.size()};
}

std::vector<std::string> MemoryTensorSource::names() const {
  std::vector<std::string> v;
  for (const auto& [name, e] : tensors_) v.push_back(name);
  return v;
}

}  // namespace trillion
