// Shared by the runtime's MPI tests: the process's MpiEnv (one per process,
// made by a Boost.Test global fixture) and content patterns that depend on
// (source, destination, sequence), so a misplaced, lost, duplicated or torn
// message shows up as a content mismatch.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "runtime/mpi_env.hpp"

namespace trillion::test {

MpiEnv& env();

inline uint64_t mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline uint64_t seed_of(int src, int dest, uint64_t seq) {
  return mix((uint64_t(src) << 48) ^ (uint64_t(dest) << 32) ^ seq);
}

inline void fill_pattern(std::span<std::byte> out, uint64_t seed) {
  size_t i = 0;
  for (; i + 8 <= out.size(); i += 8) {
    uint64_t w = mix(seed + i);
    std::memcpy(out.data() + i, &w, 8);
  }
  uint64_t w = mix(seed + i);
  if (i < out.size()) std::memcpy(out.data() + i, &w, out.size() - i);
}

inline std::vector<std::byte> pattern(size_t n, uint64_t seed) {
  std::vector<std::byte> v(n);
  fill_pattern(v, seed);
  return v;
}

inline bool has_pattern(std::span<const std::byte> in, uint64_t seed) {
  size_t i = 0;
  for (; i + 8 <= in.size(); i += 8) {
    uint64_t w = mix(seed + i);
    if (std::memcmp(in.data() + i, &w, 8) != 0) return false;
  }
  uint64_t w = mix(seed + i);
  return i == in.size() || std::memcmp(in.data() + i, &w, in.size() - i) == 0;
}

}  // namespace trillion::test
