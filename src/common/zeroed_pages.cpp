#include "common/zeroed_pages.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <new>
#include <string>
#include <utility>

#include "platform/memory_advice.hpp"

namespace trillion {

namespace {

constexpr size_t kHuge = size_t(2) << 20;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

bool huge_pages_wanted() {
  const char* v = std::getenv("TRILLION_HUGE_PAGES");
  return !v || std::string(v) != "0";
}

// mmap aligns only to the base page: map 2 MiB more and give back the ends.
ZeroedPages::ZeroedPages(size_t bytes) {
  if (bytes == 0) return;
  if (bytes > SIZE_MAX - 2 * kHuge) throw std::bad_alloc();
  const size_t size = round_up(bytes, kHuge);
  void* p = ::mmap(nullptr, size + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  auto* raw = static_cast<std::byte*>(p);
  const uintptr_t a = reinterpret_cast<uintptr_t>(raw);
  const size_t head = round_up(a, kHuge) - a;
  if (head) ::munmap(raw, head);
  if (kHuge - head) ::munmap(raw + head + size, kHuge - head);
  base_ = raw + head;
  size_ = size;
  if (huge_pages_wanted()) platform::advise(base_, size_, platform::Advice::huge_pages);
}

ZeroedPages::~ZeroedPages() {
  if (base_) ::munmap(base_, size_);
}

ZeroedPages::ZeroedPages(ZeroedPages&& o) noexcept
    : base_(std::exchange(o.base_, nullptr)), size_(std::exchange(o.size_, 0)) {}

ZeroedPages& ZeroedPages::operator=(ZeroedPages&& o) noexcept {
  if (this != &o) {
    if (base_) ::munmap(base_, size_);
    base_ = std::exchange(o.base_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

}  // namespace trillion
