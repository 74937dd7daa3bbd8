#include "platform/page_stats.hpp"

#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace trillion::platform {

bool read_self_smaps(std::string& text) {
  std::ifstream f("/proc/self/smaps");
  if (!f) return false;
  std::ostringstream s;
  s << f.rdbuf();
  text = s.str();
  return true;
}

bool transparent_huge_pages_enabled() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (!f || !std::getline(f, line)) return false;
  return line.find("[never]") == std::string::npos;
}

bool resident_pages(const void* addr, size_t len, std::vector<bool>& resident) {
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in((len + page - 1) / page);
  if (::mincore(const_cast<void*>(addr), len, in.data()) != 0) return false;
  resident.assign(in.size(), false);
  for (size_t i = 0; i < in.size(); ++i) resident[i] = (in[i] & 1) != 0;
  return true;
}

bool on_memory_filesystem(const std::string& path) {
  struct statfs fs {};
  if (::statfs(path.c_str(), &fs) != 0) return false;
  constexpr long kTmpfs = 0x01021994, kRamfs = 0x858458f6;  // linux/magic.h
  return long(fs.f_type) == kTmpfs || long(fs.f_type) == kRamfs;
}

}  // namespace trillion::platform
