#include "common/checksum.hpp"

#include <xxhash.h>

#include <cstdio>
#include <new>

namespace trillion {

void Xxh64::FreeState::operator()(XXH64_state_s* s) const { XXH64_freeState(s); }

Xxh64::Xxh64(uint64_t seed) : state_(XXH64_createState()) {
  if (!state_) throw std::bad_alloc();
  XXH64_reset(state_.get(), seed);
}

Xxh64::~Xxh64() = default;
Xxh64::Xxh64(Xxh64&&) noexcept = default;
Xxh64& Xxh64::operator=(Xxh64&&) noexcept = default;

void Xxh64::update(const void* data, size_t len) { XXH64_update(state_.get(), data, len); }

uint64_t Xxh64::digest() const { return XXH64_digest(state_.get()); }

uint64_t xxh64(const void* data, size_t len, uint64_t seed) { return XXH64(data, len, seed); }

std::string checksum_string(uint64_t h) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "xxh64:%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace trillion
