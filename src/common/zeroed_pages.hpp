// Anonymous memory straight from the kernel: zeroed by it, and backed page by
// page at first touch, so mapping a large region costs nothing until it is
// used. The KV cache's pool (model/kv_cache.hpp) lives here: a pool sized
// for 128 slots x 4096 positions used to be zero-filled by the process at
// start (seconds of page faults and memset for memory a short job never
// touches), and the weights made at load (page_arena.hpp) take their chunks
// from here too.
#pragma once
#include <cstddef>

namespace trillion {

// Whether to advise 2 MiB pages (here and for mapped shards): yes unless
// TRILLION_HUGE_PAGES=0, which leaves pages to the kernel's default.
bool huge_pages_wanted();

class ZeroedPages {
 public:
  ZeroedPages() = default;
  // `bytes` (rounded up to 2 MiB) at a 2 MiB boundary, advised for 2 MiB pages
  // when huge_pages_wanted(); nothing is touched. Throws std::bad_alloc when
  // the system will not map them.
  explicit ZeroedPages(size_t bytes);
  ~ZeroedPages();
  ZeroedPages(ZeroedPages&& o) noexcept;
  ZeroedPages& operator=(ZeroedPages&& o) noexcept;
  ZeroedPages(const ZeroedPages&) = delete;
  ZeroedPages& operator=(const ZeroedPages&) = delete;

  std::byte* data() const { return base_; }
  size_t size() const { return size_; }  // mapped bytes (a multiple of 2 MiB)

 private:
  std::byte* base_ = nullptr;
  size_t size_ = 0;
};

}  // namespace trillion
