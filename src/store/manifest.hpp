// manifest.json of a converted model (docs/format.md): which shard files
// exist, and for every tensor its shard, dtype, shape, byte range and XXH64.
// Parsing validates every field, so the loader and `plan` can trust it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/dtype.hpp"
#include "config/model_config.hpp"
#include "format/hf_tensors.hpp"

namespace trillion {

struct ShardInfo {
  std::string file;          // name inside the model directory
  uint64_t bytes = 0;        // exact file size
  TensorRole role = TensorRole::layer;
  int64_t layer = -1;        // layer/experts/mtp roles
  int64_t expert_first = -1; // experts roles: inclusive range
  int64_t expert_last = -1;
  // XXH64 of the file's bytes outside its tensors' data (HDF5's superblock,
  // object headers, attributes), checked before libhdf5 parses any of it:
  // libhdf5 has memory errors on crafted metadata (tests/fuzz/findings), so
  // it only ever reads the metadata the converter wrote. Absent in manifests
  // written before it existed (then not checked).
  std::optional<uint64_t> metadata_checksum;
};

struct TensorInfo {
  std::string name;
  std::string shard;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t offset = 0;   // of the data in the shard file
  uint64_t nbytes = 0;
  uint64_t checksum = 0; // XXH64 of the data, seed 0
  std::vector<int64_t> weight_shape;  // int4 weight_packed: unpacked [out, in]; else empty

  int64_t numel() const;
};

class Manifest {
 public:
  WeightFormat weight_format = WeightFormat::bf16;
  int64_t experts_per_shard = 32;
  std::string source_path;   // the HF directory converted from (information only)
  // "bf16" when written by `convert --quantize` (weight_format is then the
  // target format, every linear layer incl. lm_head in it); "" otherwise.
  std::string quantized_from;

  // Building (the converter). add_tensor requires its shard to be added first.
  void add_shard(ShardInfo s);
  void add_tensor(TensorInfo t);
  ShardInfo& shard_mut(const std::string& file);

  const std::vector<ShardInfo>& shards() const { return shards_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // in shard order
  const ShardInfo* find_shard(const std::string& file) const;
  const TensorInfo* find_tensor(const std::string& name) const;
  // The tensors of one shard, in file order.
  std::vector<const TensorInfo*> tensors_of(const std::string& file) const;

  nlohmann::json to_json() const;
  // Validates every field; throws FormatError naming `source` and the entry.
  static Manifest from_json(const nlohmann::json& j, const std::string& source);
  static Manifest read(const std::string& path);
  void write(const std::string& path) const;  // throws SystemError

 private:
  std::vector<ShardInfo> shards_;
  std::vector<TensorInfo> tensors_;
  std::vector<std::vector<size_t>> shard_tensors_;  // per shard: indices into tensors_
  std::unordered_map<std::string, size_t> shard_index_, tensor_index_;
};

// Parses "xxh64:<16 hex digits>"; nullopt when malformed.
std::optional<uint64_t> parse_checksum(const std::string& s);

}  // namespace trillion
