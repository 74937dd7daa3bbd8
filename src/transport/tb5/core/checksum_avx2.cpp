// XXH3 with AVX2 (this file only is built with -mavx2; checksum.cpp calls it
// after checking the CPU).
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace trillion::tb5 {

uint64_t hash64_avx2(const void* data, size_t len, uint64_t seed) { return XXH3_64bits_withSeed(data, len, seed); }

uint64_t hash64_2_avx2(const void* a, size_t alen, const void* b, size_t blen) {
  XXH3_state_t st;
  XXH3_64bits_reset(&st);
  XXH3_64bits_update(&st, a, alen);
  XXH3_64bits_update(&st, b, blen);
  return XXH3_64bits_digest(&st);
}

}  // namespace trillion::tb5
