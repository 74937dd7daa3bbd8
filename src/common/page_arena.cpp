#include "common/page_arena.hpp"

#include <cstdint>
#include <new>
#include <utility>

namespace trillion {

namespace {

constexpr size_t kHuge = size_t(2) << 20;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

PageArena::PageArena(size_t chunk_bytes) : chunk_bytes_(round_up(chunk_bytes == 0 ? kHuge : chunk_bytes, kHuge)) {}

PageArena::~PageArena() = default;

std::byte* PageArena::allocate(size_t bytes, size_t align) {
  if (align == 0 || (align & (align - 1)) || align > kHuge) throw std::bad_alloc();
  // The newest chunk first; a block that fits no chunk's tail gets a new one
  // (the old tail is left: blocks are weights of similar sizes, so little is).
  if (!chunks_.empty()) {
    Chunk& c = chunks_.back();
    const size_t at = round_up(c.used, align);
    if (at <= c.pages.size() && bytes <= c.pages.size() - at) {
      c.used = at + bytes;
      return c.pages.data() + at;
    }
  }
  const size_t size = bytes > chunk_bytes_ ? round_up(bytes, kHuge) : chunk_bytes_;
  chunks_.reserve(chunks_.size() + 1);  // so push_back cannot throw with a chunk mapped
  ZeroedPages pages(size);
  std::byte* base = pages.data();
  chunks_.push_back({std::move(pages), bytes});
  return base;
}

size_t PageArena::reserved_bytes() const {
  size_t n = 0;
  for (const Chunk& c : chunks_) n += c.pages.size();
  return n;
}

}  // namespace trillion
