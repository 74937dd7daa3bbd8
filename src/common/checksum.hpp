// The manifest's per-tensor checksums: XXH64 (Yann Collet's xxHash, 64-bit
// variant; seed 0 in the manifest) from libxxhash (Debian libxxhash-dev,
// Homebrew xxhash). Fast enough (>10 GB/s per core) to verify weights while
// they are read. The algorithm is part of the format (docs/format.md):
// another one would invalidate every converted model.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

struct XXH64_state_s;  // libxxhash's streaming state (xxhash.h stays out of this header)

namespace trillion {

uint64_t xxh64(const void* data, size_t len, uint64_t seed = 0);

// Incremental form, for data streamed in pieces (the converter hashes while it writes).
class Xxh64 {
 public:
  explicit Xxh64(uint64_t seed = 0);
  ~Xxh64();
  Xxh64(Xxh64&&) noexcept;
  Xxh64& operator=(Xxh64&&) noexcept;
  void update(const void* data, size_t len);
  uint64_t digest() const;

 private:
  struct FreeState {
    void operator()(XXH64_state_s* s) const;
  };
  std::unique_ptr<XXH64_state_s, FreeState> state_;
};

// "xxh64:0123456789abcdef", the manifest's spelling.
std::string checksum_string(uint64_t h);

}  // namespace trillion
