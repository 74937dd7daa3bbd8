#include "format/mapped_pages.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <sstream>
#include <vector>

#include "platform/page_stats.hpp"

namespace trillion {

namespace {

// A mapping's header line: "start-end perms offset dev inode [path]"; its
// first field holds a '-' between two hex numbers, a field line ("Rss: ...")
// ends its first word with ':'.
bool is_header(const std::string& line) {
  const size_t space = line.find(' ');
  const std::string first = line.substr(0, space);
  const size_t dash = first.find('-');
  if (dash == std::string::npos || dash == 0 || dash + 1 == first.size()) return false;
  for (size_t i = 0; i < first.size(); ++i)
    if (i != dash && !std::isxdigit(static_cast<unsigned char>(first[i]))) return false;
  return true;
}

// The path of a header line: the sixth field to the end of the line ("" for anonymous mappings).
std::string header_path(const std::string& line) {
  std::istringstream in(line);
  std::string field;
  for (int i = 0; i < 5; ++i)
    if (!(in >> field)) return "";
  std::string rest;
  std::getline(in, rest);
  const size_t b = rest.find_first_not_of(' ');
  return b == std::string::npos ? "" : rest.substr(b);
}

// "Name:   1234 kB" -> bytes, when the line is that field.
bool field_bytes(const std::string& line, const char* name, int64_t& bytes) {
  const std::string key = std::string(name) + ":";
  if (line.compare(0, key.size(), key) != 0) return false;
  std::istringstream in(line.substr(key.size()));
  int64_t kb = 0;
  std::string unit;
  if (!(in >> kb >> unit) || unit != "kB") return false;
  bytes = kb * 1024;
  return true;
}

}  // namespace

MappedPages parse_smaps(const std::string& smaps, const std::string& suffix) {
  MappedPages out;
  std::istringstream in(smaps);
  bool counting = false;
  for (std::string line; std::getline(in, line);) {
    if (is_header(line)) {
      const std::string path = header_path(line);
      counting = !path.empty() && path.ends_with(suffix);
      out.mappings += counting;
      continue;
    }
    if (!counting) continue;
    int64_t b = 0;
    if (field_bytes(line, "Rss", b)) out.resident_bytes += b;
    else if (field_bytes(line, "FilePmdMapped", b)) out.huge_bytes += b;
  }
  return out;
}

MappedPages mapped_pages(const std::string& suffix) {
  std::string text;
  if (!platform::read_self_smaps(text)) return {};
  return parse_smaps(text, suffix);
}

bool mostly_small_pages(const MappedPages& p) {
  return p.resident_bytes >= (int64_t(256) << 20) && 2 * p.huge_bytes < p.resident_bytes;
}

int64_t cached_bytes(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return -1;
  }
  const size_t size = size_t(st.st_size);
  if (size == 0) {
    ::close(fd);
    return 0;
  }
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return -1;
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  std::vector<bool> resident;
  int64_t cached = -1;
  if (platform::resident_pages(p, size, resident)) {
    cached = 0;
    for (bool r : resident) cached += r ? int64_t(page) : 0;
  }
  ::munmap(p, size);
  return cached;
}

}  // namespace trillion
