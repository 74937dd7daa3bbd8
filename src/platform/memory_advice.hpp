// Advice to the virtual memory system about mapped ranges and cached files:
// hints, whose failure is harmless, so nothing here reports one.
#pragma once
#include <cstddef>
#include <cstdint>

namespace trillion::platform {

enum class Advice {
  sequential,  // read front to back soon: read ahead (MADV_SEQUENTIAL)
  not_needed,  // done with it: its pages may go (MADV_DONTNEED; file-backed
               // pages are read back from the file when touched again)
  huge_pages,  // back it with 2 MiB pages (Linux's transparent huge pages,
               // MADV_HUGEPAGE; format/mapped_file.hpp says why). macOS has
               // no such advice: its arm64 pages are 16 KiB, and it is a no-op.
};

// `addr` is page-aligned; `len` need not be a multiple of the page size.
void advise(const void* addr, size_t len, Advice advice);

// Drops the file's clean pages from the page cache (Linux:
// posix_fadvise(POSIX_FADV_DONTNEED) over [offset, offset + len), len 0
// to the end; dirty pages stay, so sync the file first). false where it
// cannot be asked: macOS has no call that evicts a file's cached pages.
bool drop_file_cache(int fd, int64_t offset, int64_t len);

// Whether drop_file_cache can do anything here: callers skip the sync a
// drop needs where it cannot (Linux: true; macOS: false).
bool can_drop_file_cache();

}  // namespace trillion::platform
