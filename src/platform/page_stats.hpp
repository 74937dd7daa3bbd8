// Where a process's pages sit: the raw figures each operating system gives
// (format/mapped_pages.hpp turns them into statistics of mapped shards).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace trillion::platform {

// The text of this process's smaps (Linux: /proc/self/smaps: each mapping's
// resident and huge-page bytes). false where there is none (macOS).
bool read_self_smaps(std::string& text);

// Whether transparent huge pages can back a mapping: Linux's
// /sys/kernel/mm/transparent_hugepage/enabled is not `never`. false where
// there is no such setting (macOS).
bool transparent_huge_pages_enabled();

// Which pages of [addr, addr + len) are resident (mincore: Linux takes an
// unsigned char vector, macOS a char one): resident[i] for page i, whose
// size is the system's page size. false when the call fails.
bool resident_pages(const void* addr, size_t len, std::vector<bool>& resident);

// Whether `path` lies on a filesystem kept in memory (Linux's tmpfs and
// ramfs; macOS's tmpfs), whose pages have no disk copy to be read back from
// and so are never dropped from the cache.
bool on_memory_filesystem(const std::string& path);

}  // namespace trillion::platform
