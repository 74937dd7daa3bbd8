// Opens one shard of a converted model the way docs/format.md "Loading" says:
// the file size is checked against the manifest before anything else, HDF5
// confirms every listed dataset (contiguous, offset, shape, dtype, checksum
// attribute), and only then is the whole file mapped read-only. The HDF5
// handle is closed again: what stays is one mapping, no descriptor.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "format/mapped_file.hpp"
#include "store/manifest.hpp"

namespace trillion {

// One problem found in a shard; `tensor` is empty when it concerns the whole file.
struct ShardProblem {
  std::string tensor;
  std::string message;
};

// Checks a shard without mapping it: size against the manifest, then (if the
// size is right) the HDF5 file and every listed dataset. Returns every
// problem found; empty means the shard is good (checksums not yet hashed).
std::vector<ShardProblem> check_shard(const std::string& path, const ShardInfo& shard,
                                      const std::vector<const TensorInfo*>& tensors);

class MappedShard {
 public:
  // Runs check_shard and maps the file; throws FormatError naming the file
  // (and the tensor) for the first problem: missing file, wrong size, not
  // HDF5 / damaged, dataset absent or different.
  MappedShard(const std::string& dir, const ShardInfo& shard, const std::vector<const TensorInfo*>& tensors);

  const std::string& path() const { return map_.path(); }
  size_t size() const { return map_.size(); }
  const std::byte* data(const TensorInfo& t) const { return map_.data() + t.offset; }
  const MappedFile& mapping() const { return map_; }

 private:
  MappedFile map_;
};

// The size check alone (inspect lists missing / wrong-size shards without
// opening them). Returns "" when the file exists with the manifest's size.
std::string shard_file_problem(const std::string& path, const ShardInfo& shard);

// XXH64 over a shard file's bytes outside the data ranges of `tensors` (its
// HDF5 metadata), in file order (ShardInfo::metadata_checksum).
uint64_t shard_metadata_checksum(const std::byte* file, size_t size, const std::vector<const TensorInfo*>& tensors);

// Hashes a mapped tensor and compares with the manifest; throws FormatError
// naming the tensor and the file on mismatch.
void verify_checksum(const std::string& path, const TensorInfo& t, const std::byte* data);

}  // namespace trillion
