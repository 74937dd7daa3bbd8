// src/platform: each seam keeps its promise on the system it runs on. Where
// Linux states the same fact another way (/proc/self/status, /proc/mounts),
// the seam must agree with it; those checks are skipped where the files are
// absent (macOS), and the rest hold on both systems.
#define BOOST_TEST_MODULE platform
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "platform/allocator.hpp"
#include "platform/cpu.hpp"
#include "platform/file_sync.hpp"
#include "platform/memory_advice.hpp"
#include "platform/page_stats.hpp"
#include "platform/process_memory.hpp"
#include "platform/socket.hpp"
#include "platform/verbs_library.hpp"

namespace platform = trillion::platform;

namespace {

// The value of a "Name:\t..." line of /proc/self/status; "" when absent.
std::string proc_status(const std::string& name) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.compare(0, name.size() + 1, name + ":") == 0) {
      const size_t b = line.find_first_not_of(" \t", name.size() + 1);
      return b == std::string::npos ? "" : line.substr(b);
    }
  return "";
}

// CPUs in a list such as "0-3,6".
int count_cpu_list(const std::string& list) {
  int n = 0;
  std::istringstream in(list);
  for (std::string part; std::getline(in, part, ',');) {
    const size_t dash = part.find('-');
    n += dash == std::string::npos ? 1 : std::stoi(part.substr(dash + 1)) - std::stoi(part.substr(0, dash)) + 1;
  }
  return n;
}

struct TempFile {
  std::string path = (std::filesystem::temp_directory_path() / ("trillion-platform-" + std::to_string(::getpid())))
                         .string();
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ~TempFile() {
    if (fd >= 0) ::close(fd);
    ::unlink(path.c_str());
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(a_udp_socket_is_non_blocking_and_closed_on_exec) {
  const int fd = platform::open_udp_socket();
  BOOST_REQUIRE(fd >= 0);
  BOOST_TEST((::fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
  BOOST_TEST((::fcntl(fd, F_GETFL) & O_NONBLOCK) != 0);
  int type = 0;
  socklen_t len = sizeof type;
  BOOST_TEST(::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0);
  BOOST_TEST(type == SOCK_DGRAM);
  char byte;
  BOOST_TEST(::recv(fd, &byte, 1, 0) == -1);  // nothing sent: returns at once
  BOOST_TEST((errno == EAGAIN || errno == EWOULDBLOCK));
  ::close(fd);
}

BOOST_AUTO_TEST_CASE(files_sync_and_a_bad_descriptor_says_so) {
  TempFile f;
  BOOST_REQUIRE(f.fd >= 0);
  BOOST_REQUIRE(::write(f.fd, "bytes", 5) == 5);
  BOOST_TEST(platform::sync_file(f.fd));
  BOOST_TEST(platform::sync_file_data(f.fd));
  BOOST_TEST(platform::drop_file_cache(f.fd, 0, 0) == platform::can_drop_file_cache());
  errno = 0;
  BOOST_TEST(!platform::sync_file(-1));
  BOOST_TEST(errno == EBADF);
  BOOST_TEST(!platform::sync_file_data(-1));
}

BOOST_AUTO_TEST_CASE(resident_pages_are_the_touched_ones) {
  const size_t page = size_t(::sysconf(_SC_PAGESIZE)), n = 4;
  void* p = ::mmap(nullptr, n * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  BOOST_REQUIRE(p != MAP_FAILED);
  static_cast<volatile char*>(p)[2 * page] = 1;
  std::vector<bool> resident;
  BOOST_REQUIRE(platform::resident_pages(p, n * page - 1, resident));  // a partial last page counts
  BOOST_TEST(resident == (std::vector<bool>{false, false, true, false}));
  // Hints only: the bytes stay readable whatever they do.
  for (auto a : {platform::Advice::sequential, platform::Advice::huge_pages, platform::Advice::not_needed})
    platform::advise(p, n * page, a);
  BOOST_TEST((static_cast<volatile char*>(p)[2 * page] == 0 || static_cast<volatile char*>(p)[2 * page] == 1));
  ::munmap(p, n * page);
}

BOOST_AUTO_TEST_CASE(smaps_and_memory_filesystems_agree_with_proc) {
  std::string smaps;
  const bool have = platform::read_self_smaps(smaps);
  BOOST_TEST(have == std::filesystem::exists("/proc/self/smaps"));
  if (have) BOOST_TEST(smaps.find("Rss:") != std::string::npos);
  if (!std::filesystem::exists("/sys/kernel/mm/transparent_hugepage/enabled"))
    BOOST_TEST(!platform::transparent_huge_pages_enabled());
  BOOST_TEST(!platform::on_memory_filesystem("/no/such/path"));
  std::ifstream mounts("/proc/mounts");  // "device mountpoint type options ..."
  for (std::string dev, dir, type, rest; mounts >> dev >> dir >> type && std::getline(mounts, rest);)
    if (dir == "/dev/shm" || dir == "/run")
      BOOST_TEST(platform::on_memory_filesystem(dir) == (type == "tmpfs" || type == "ramfs"), dir << " " << type);
}

BOOST_AUTO_TEST_CASE(memory_is_counted_in_bytes) {
  const int64_t before = platform::resident_bytes();
  BOOST_TEST(before > 0);
  std::vector<char> block(size_t(64) << 20);
  for (size_t i = 0; i < block.size(); i += 4096) block[i] = char(i);
  const int64_t now = platform::resident_bytes(), peak = platform::peak_resident_bytes();
  BOOST_TEST(now >= before + (int64_t(32) << 20));
  BOOST_TEST(peak >= now - (int64_t(4) << 20));  // bytes, not Linux's KiB
  BOOST_TEST(peak < platform::physical_memory_bytes());
  const std::string vm_rss = proc_status("VmRSS");  // "1234 kB"
  if (!vm_rss.empty()) {
    const int64_t kib = std::atoll(vm_rss.c_str());
    BOOST_TEST(std::llabs(kib * 1024 - platform::resident_bytes()) < (int64_t(16) << 20));
  }
  BOOST_TEST(block[4096] == char(4096));
}

BOOST_AUTO_TEST_CASE(cores_and_affinity_are_plausible) {
  const int logical = int(std::thread::hardware_concurrency());
  const int cores = platform::compute_cores();
  BOOST_TEST(cores >= 1);
  if (logical > 0) BOOST_TEST(cores <= logical);
  std::vector<unsigned> cpus;
  const std::string allowed = proc_status("Cpus_allowed_list");
  if (!allowed.empty()) {
    BOOST_REQUIRE(platform::allowed_cpus(cpus));
    BOOST_TEST(int(cpus.size()) == count_cpu_list(allowed));
  }
  const std::string id = platform::boot_id();
  BOOST_TEST(id == platform::boot_id());
  if (std::filesystem::exists("/proc/sys/kernel/random/boot_id")) BOOST_TEST(id.size() == 36u);  // a UUID
}

BOOST_AUTO_TEST_CASE(the_rest_answers) {
  platform::configure_allocator();
  platform::configure_allocator();  // twice is harmless
  const std::string verbs = platform::default_verbs_library();
  BOOST_TEST((verbs.ends_with(".so.1") || verbs.ends_with(".dylib")));
}
