#include "transport/tb5/core/checksum.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace trillion::tb5 {

namespace {

uint64_t hash64_base(const void* data, size_t len, uint64_t seed) { return XXH3_64bits_withSeed(data, len, seed); }
uint64_t hash64_2_base(const void* a, size_t alen, const void* b, size_t blen) {
  XXH3_state_t st;  // the streaming form gives the one-shot hash of a then b
  XXH3_64bits_reset(&st);
  XXH3_64bits_update(&st, a, alen);
  XXH3_64bits_update(&st, b, blen);
  return XXH3_64bits_digest(&st);
}

}  // namespace

#if defined(__x86_64__) && defined(TB5_HAVE_AVX2_HASH)
uint64_t hash64_avx2(const void* data, size_t len, uint64_t seed);  // checksum_avx2.cpp
uint64_t hash64_2_avx2(const void* a, size_t alen, const void* b, size_t blen);

namespace {
const bool avx2 = [] {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2");
}();
}  // namespace

uint64_t hash64(const void* data, size_t len, uint64_t seed) {
  return avx2 ? hash64_avx2(data, len, seed) : hash64_base(data, len, seed);
}
uint64_t hash64_2(const void* a, size_t alen, const void* b, size_t blen) {
  return avx2 ? hash64_2_avx2(a, alen, b, blen) : hash64_2_base(a, alen, b, blen);
}
#else
uint64_t hash64(const void* data, size_t len, uint64_t seed) { return hash64_base(data, len, seed); }
uint64_t hash64_2(const void* a, size_t alen, const void* b, size_t blen) {
  return hash64_2_base(a, alen, b, blen);
}
#endif

}  // namespace trillion::tb5
