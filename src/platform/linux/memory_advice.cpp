#include "platform/memory_advice.hpp"

#include <fcntl.h>
#include <sys/mman.h>

namespace trillion::platform {

void advise(const void* addr, size_t len, Advice advice) {
  void* p = const_cast<void*>(addr);
  switch (advice) {
    case Advice::sequential: ::madvise(p, len, MADV_SEQUENTIAL); break;
    case Advice::not_needed: ::madvise(p, len, MADV_DONTNEED); break;
    case Advice::huge_pages:
#ifdef MADV_HUGEPAGE  // EINVAL from a kernel without THP: a hint, ignored
      ::madvise(p, len, MADV_HUGEPAGE);
#endif
      break;
  }
}

bool drop_file_cache(int fd, int64_t offset, int64_t len) {
  return ::posix_fadvise(fd, off_t(offset), off_t(len), POSIX_FADV_DONTNEED) == 0;
}

bool can_drop_file_cache() { return true; }

}  // namespace trillion::platform
