// A whole file mapped read-only (RAII). Both sides of the weights path use it:
// the converter reads safetensors through it, the loader hands out pointers
// into mapped HDF5 shards, so bytes are never copied on the way in.
#pragma once
#include <cstddef>
#include <string>

namespace trillion {

class MappedFile {
 public:
  MappedFile() = default;
  // Maps `path` read-only; throws SystemError naming the file. An empty file
  // maps to data() == nullptr, size() == 0.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }

  // Hints for streaming a range once (the converter): aggressive read-ahead
  // while copying, then unmap the pages from this process so its resident size
  // stays small when converting a checkpoint larger than RAM (the page cache
  // still decides what stays cached).
  void advise_sequential(size_t offset, size_t len) const;
  void advise_done(size_t offset, size_t len) const;

  // Asks for 2 MiB pages over the whole mapping (Linux transparent huge
  // pages; a no-op elsewhere, or when TRILLION_HUGE_PAGES=0). Decode streams
  // ~180 small matrices a step from all over the weights, and with 4 KiB
  // pages every 4 KiB read past the TLB is a page walk (dearer in a virtual
  // machine; docs/kernels.md, "Memory", has what it gains).
  // It shapes only pages read in after it: a file the page cache already
  // holds in small pages stays so (Linux without READ_ONLY_THP_FOR_FS cannot
  // collapse file pages), so call it before the first touch.
  void advise_huge_pages() const;

 private:
  void reset() noexcept;
  std::string path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

// Writes `path`'s dirty pages to disk and asks the kernel to drop its pages
// from the page cache (POSIX_FADV_DONTNEED; pages a process maps stay). Why:
// the converter's writes leave a shard cached in the small folios they made
// (a freshly converted model sat mostly on 4 KiB pages), and a later run maps
// the cached pages as they are, so advise_huge_pages comes too late; read
// back after the drop, nearly all of it sits on 2 MiB pages (docs/kernels.md,
// "Memory"). Throws SystemError naming the file
// when it cannot be opened or synced; the drop itself is a hint. macOS
// cannot drop a file's pages (platform/memory_advice.hpp): there it only
// checks that the file opens.
void drop_cached_pages(const std::string& path);

}  // namespace trillion
