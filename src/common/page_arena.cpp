#include "common/page_arena.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <new>
#include <string>

#include "platform/memory_advice.hpp"

namespace trillion {

namespace {

constexpr size_t kHuge = size_t(2) << 20;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// `size` bytes (a multiple of 2 MiB) at a 2 MiB boundary: map 2 MiB more and
// give back the ends, as mmap aligns only to the base page.
std::byte* map_aligned(size_t size) {
  void* p = ::mmap(nullptr, size + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  auto* raw = static_cast<std::byte*>(p);
  const uintptr_t a = reinterpret_cast<uintptr_t>(raw);
  const size_t head = round_up(a, kHuge) - a;
  if (head) ::munmap(raw, head);
  if (kHuge - head) ::munmap(raw + head + size, kHuge - head);
  std::byte* base = raw + head;
  if (huge_pages_wanted()) platform::advise(base, size, platform::Advice::huge_pages);
  return base;
}

}  // namespace

bool huge_pages_wanted() {
  const char* v = std::getenv("TRILLION_HUGE_PAGES");
  return !v || std::string(v) != "0";
}

PageArena::PageArena(size_t chunk_bytes) : chunk_bytes_(round_up(chunk_bytes == 0 ? kHuge : chunk_bytes, kHuge)) {}

PageArena::~PageArena() {
  for (const Chunk& c : chunks_) ::munmap(c.base, c.size);
}

std::byte* PageArena::allocate(size_t bytes, size_t align) {
  if (align == 0 || (align & (align - 1)) || align > kHuge) throw std::bad_alloc();
  // The newest chunk first; a block that fits no chunk's tail gets a new one
  // (the old tail is left: blocks are weights of similar sizes, so little is).
  if (!chunks_.empty()) {
    Chunk& c = chunks_.back();
    const size_t at = round_up(c.used, align);
    if (at <= c.size && bytes <= c.size - at) {
      c.used = at + bytes;
      return c.base + at;
    }
  }
  const size_t size = bytes > chunk_bytes_ ? round_up(bytes, kHuge) : chunk_bytes_;
  chunks_.reserve(chunks_.size() + 1);  // so push_back cannot throw with a chunk mapped
  chunks_.push_back({map_aligned(size), size, bytes});
  return chunks_.back().base;
}

size_t PageArena::reserved_bytes() const {
  size_t n = 0;
  for (const Chunk& c : chunks_) n += c.size;
  return n;
}

}  // namespace trillion
