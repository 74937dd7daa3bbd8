// One .safetensors file (docs/checkpoint.md), mapped and fully validated on
// open: a header that lies about its tensors is an error naming the file and
// the tensor, never an out-of-bounds read later.
//
// Layout: u64 little-endian N, N bytes of JSON header, then the data section.
// Every tensor's data_offsets are relative to the data section.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/dtype.hpp"
#include "format/mapped_file.hpp"

namespace trillion {

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // absolute byte offset of the data in the file
  uint64_t end = 0;    // one past the last byte
  uint64_t nbytes() const { return end - begin; }
};

class SafetensorsFile {
 public:
  // Maps `path` and validates every header field; throws FormatError naming the
  // file (and tensor), SystemError when the file cannot be read.
  explicit SafetensorsFile(const std::string& path);

  const std::string& path() const { return map_.path(); }
  uint64_t file_size() const { return map_.size(); }
  uint64_t data_start() const { return data_start_; }  // 8 + header length
  // Tensors in file order (ascending offsets).
  const std::vector<SafetensorsEntry>& tensors() const { return tensors_; }
  const SafetensorsEntry* find(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  const std::byte* data(const SafetensorsEntry& t) const { return map_.data() + t.begin; }
  const MappedFile& mapping() const { return map_; }

 private:
  MappedFile map_;
  uint64_t data_start_ = 0;
  std::vector<SafetensorsEntry> tensors_;
  std::unordered_map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// Validates a header held in memory against a file of `file_size` bytes whose
// header is `header_len` bytes long; returns the tensors in offset order.
// `path` only names the file in messages. (Separate from the mapping so the
// rules can be read, and tested, on their own.)
std::vector<SafetensorsEntry> parse_safetensors_header(const std::string& path, const char* header,
                                                       uint64_t header_len, uint64_t file_size,
                                                       std::map<std::string, std::string>* metadata);

}  // namespace trillion
