// Bump allocation of long-lived, read-mostly blocks (weights made at load)
// in 2 MiB-aligned anonymous chunks advised for transparent huge pages
// before their first touch. Decode reads weights from all over memory, and
// on 4 KiB pages each 4 KiB is a TLB miss (format/mapped_file.hpp has the
// figures for mapped shards); the heap's pages are 4 KiB under Linux's
// default THP setting (`madvise`). Blocks are freed with the arena, never
// singly. Not thread-safe: callers serialize.
#pragma once
#include <cstddef>
#include <vector>

#include "common/zeroed_pages.hpp"

namespace trillion {

class PageArena {
 public:
  // chunk_bytes: the size of each chunk (rounded up to 2 MiB); a block larger
  // than that gets a chunk of its own.
  explicit PageArena(size_t chunk_bytes = size_t(64) << 20);
  ~PageArena();
  PageArena(const PageArena&) = delete;
  PageArena& operator=(const PageArena&) = delete;

  // `bytes` of zeroed memory aligned to `align` (a power of two up to 2 MiB);
  // throws std::bad_alloc when the system has none.
  std::byte* allocate(size_t bytes, size_t align = 64);

  size_t reserved_bytes() const;  // of every chunk

 private:
  struct Chunk {
    ZeroedPages pages;
    size_t used;
  };
  size_t chunk_bytes_;
  std::vector<Chunk> chunks_;
};

}  // namespace trillion
