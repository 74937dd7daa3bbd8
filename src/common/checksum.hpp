// XXH64 (Yann Collet's xxHash, 64-bit variant), written from its public
// specification. Used for the per-tensor checksums of the manifest: fast
// enough (>10 GB/s per core) to verify weights while they are read.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace trillion {

uint64_t xxh64(const void* data, size_t len, uint64_t seed = 0);

// Incremental form, for data streamed in pieces (the converter hashes while it writes).
class Xxh64 {
 public:
  explicit Xxh64(uint64_t seed = 0);
  void update(const void* data, size_t len);
  uint64_t digest() const;

 private:
  uint64_t v_[4];
  uint64_t seed_;
  uint64_t total_ = 0;
  unsigned char buf_[32];
  size_t buf_len_ = 0;
};

// "xxh64:0123456789abcdef", the manifest's spelling.
std::string checksum_string(uint64_t h);

}  // namespace trillion
