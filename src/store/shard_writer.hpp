// Writes one HDF5 shard file (docs/format.md "Datasets"): one contiguous,
// unfiltered, early-allocated dataset per tensor, aligned to 4096 bytes, with
// the checkpoint's bytes unchanged and the dtype/checksum attributes. The
// XXH64 is computed while the bytes are written, chunk by chunk, so the
// source is read once.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/dtype.hpp"

namespace trillion {

struct ShardTensor {
  std::string name;                   // dataset name: the HF tensor name
  DType dtype = DType::F32;
  std::vector<int64_t> shape;         // at least one element
  const std::byte* data = nullptr;    // numel * dtype_size bytes, C order
  std::vector<int64_t> weight_shape;  // int4 weight_packed: the unpacked [out, in]; else empty
};

struct StoredTensor {
  uint64_t offset = 0;   // byte offset of the data in the file (multiple of 4096)
  uint64_t nbytes = 0;
  uint64_t checksum = 0; // XXH64, seed 0
};

class ShardWriter {
 public:
  // Creates (truncates) `path`; throws SystemError/FormatError naming it.
  explicit ShardWriter(const std::string& path);
  ~ShardWriter();  // abandons an unfinished file (the caller deletes the staging directory)
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // Stores one tensor; `progress(bytes)` is called after each written chunk.
  StoredTensor write(const ShardTensor& t, const std::function<void(uint64_t)>& progress = {});
  // Closes the file, syncs it to disk, and returns its size in bytes.
  uint64_t finish();

  const std::string& path() const { return path_; }

 private:
  struct Handles;
  std::string path_;
  std::unique_ptr<Handles> h_;
};

}  // namespace trillion
