#include "format/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <utility>

#include "common/error.hpp"
#include "common/page_arena.hpp"
#include "platform/file_sync.hpp"
#include "platform/memory_advice.hpp"

namespace trillion {

namespace {

[[noreturn]] void fail(const std::string& path, const char* what) {
  throw SystemError(path + ": " + what + ": " + std::strerror(errno));
}

// Advice works on whole pages: widen [offset, offset+len) to page bounds.
void advise(const std::byte* base, size_t size, size_t offset, size_t len, platform::Advice advice) {
  if (!base || offset >= size || len == 0) return;
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  size_t begin = offset / page * page;
  size_t end = std::min(size, offset + len);
  platform::advise(base + begin, end - begin, advice);  // a hint: failure is harmless
}

}  // namespace

MappedFile::MappedFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, "cannot open");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    errno = e;
    fail(path, "cannot stat");
  }
  size_ = size_t(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      errno = e;
      fail(path, "cannot mmap");
    }
    data_ = static_cast<const std::byte*>(p);
  }
  ::close(fd);  // the mapping keeps the file alive; no descriptor per shard stays open
}

MappedFile::~MappedFile() { reset(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    reset();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void MappedFile::reset() noexcept {
  if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

void MappedFile::advise_sequential(size_t offset, size_t len) const {
  advise(data_, size_, offset, len, platform::Advice::sequential);
}

void MappedFile::advise_done(size_t offset, size_t len) const {
  advise(data_, size_, offset, len, platform::Advice::not_needed);
}

void drop_cached_pages(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, "cannot open");
  if (!platform::can_drop_file_cache()) {  // macOS: nothing to drop, nothing to sync for it
    ::close(fd);
    return;
  }
  // DONTNEED skips dirty pages: they must be on disk first.
  if (!platform::sync_file(fd)) {
    int e = errno;
    ::close(fd);
    errno = e;
    fail(path, "cannot sync to disk");
  }
  platform::drop_file_cache(fd, 0, 0);  // a hint: failure is harmless
  ::close(fd);
}

void MappedFile::advise_huge_pages() const {
  if (huge_pages_wanted()) advise(data_, size_, 0, size_, platform::Advice::huge_pages);  // EINVAL without THP: ignored
}

}  // namespace trillion
