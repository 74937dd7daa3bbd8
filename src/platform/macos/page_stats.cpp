#include "platform/page_stats.hpp"

#include <sys/mman.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cstring>

namespace trillion::platform {

// No smaps: vmmap(1) and the mach VM region calls give per-region resident
// pages, but nothing here reads them yet.
bool read_self_smaps(std::string&) { return false; }

bool transparent_huge_pages_enabled() { return false; }

bool resident_pages(const void* addr, size_t len, std::vector<bool>& resident) {
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  std::vector<char> in((len + page - 1) / page);
  if (::mincore(addr, len, in.data()) != 0) return false;
  resident.assign(in.size(), false);
  for (size_t i = 0; i < in.size(); ++i) resident[i] = (in[i] & MINCORE_INCORE) != 0;
  return true;
}

bool on_memory_filesystem(const std::string& path) {
  struct statfs fs {};
  if (::statfs(path.c_str(), &fs) != 0) return false;
  return std::strcmp(fs.f_fstypename, "tmpfs") == 0;
}

}  // namespace trillion::platform
