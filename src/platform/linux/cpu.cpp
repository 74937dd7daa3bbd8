#include "platform/cpu.hpp"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <utility>

#if defined(__aarch64__)
#include <sys/auxv.h>
#endif

namespace trillion::platform {

int compute_cores() {
  const int logical = int(std::max(1u, std::thread::hardware_concurrency()));
  std::set<std::pair<std::string, std::string>> cores;  // (package, core id)
  for (int cpu = 0; cpu < logical; ++cpu) {
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    std::ifstream pkg(dir + "physical_package_id"), core(dir + "core_id");
    std::string p, c;
    if (!(pkg >> p) || !(core >> c)) return logical;  // no topology (hidden)
    cores.emplace(p, c);
  }
  return std::max(1, int(cores.size()));
}

// The hwcap bits are arm64's (Linux's uapi asm/hwcap.h); older C libraries
// lack the names.
bool arm_has_dotprod() {
#if defined(__aarch64__) && defined(HWCAP_ASIMDDP)
  return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#else
  return false;
#endif
}

namespace {
// One bit of AT_HWCAP2, by its number in asm/hwcap.h (I8MM 13, BF16 14):
// the numbers rather than the names, which older C libraries lack.
bool hwcap2_bit(unsigned bit) {
#if defined(__aarch64__)
  return (getauxval(AT_HWCAP2) >> bit) & 1;
#else
  (void)bit;
  return false;
#endif
}
}  // namespace

bool arm_has_i8mm() { return hwcap2_bit(13); }

bool arm_has_bf16() { return hwcap2_bit(14); }

bool allowed_cpus(std::vector<unsigned>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return false;
  cpus.clear();
  for (unsigned cpu = 0; cpu < unsigned(CPU_SETSIZE); ++cpu)
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  return !cpus.empty();
}

std::string boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (in && std::getline(in, id)) return id;
  return "";
}

}  // namespace trillion::platform
