// The frame checksum's hash: XXH3-64, compiled into tb5 (xxhash.h inlined)
// rather than taken from the system's libxxhash, whose generic x86-64 build
// hashes at ~14 GB/s here against ~38 GB/s with AVX2 — at 64 KB frames the
// hashing took a third of the CPU time of a transfer. x86-64: the AVX2 build
// (checksum_avx2.cpp) where the CPU has AVX2, chosen once; arm64: NEON, which
// is baseline there.
#pragma once
#include <cstddef>
#include <cstdint>

namespace trillion::tb5 {

uint64_t hash64(const void* data, size_t len, uint64_t seed);
// hash64(a then b, seed 0), as if they were contiguous (a frame whose
// payload starts in one buffer and ends in another); its state on the stack.
uint64_t hash64_2(const void* a, size_t alen, const void* b, size_t blen);

}  // namespace trillion::tb5
