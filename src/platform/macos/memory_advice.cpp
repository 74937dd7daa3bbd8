#include "platform/memory_advice.hpp"

#include <sys/mman.h>

namespace trillion::platform {

void advise(const void* addr, size_t len, Advice advice) {
  void* p = const_cast<void*>(addr);
  switch (advice) {
    case Advice::sequential: ::madvise(p, len, MADV_SEQUENTIAL); break;
    case Advice::not_needed: ::madvise(p, len, MADV_DONTNEED); break;
    case Advice::huge_pages: break;  // no transparent huge pages on macOS
  }
}

// No posix_fadvise; F_NOCACHE only keeps later reads and writes out of the
// cache, and the pages a mapping caches stay until memory is short.
bool drop_file_cache(int, int64_t, int64_t) { return false; }

bool can_drop_file_cache() { return false; }

}  // namespace trillion::platform
