#include "runtime/core_sharing.hpp"

#include <algorithm>
#include <bit>
#include <fstream>
#include <functional>
#include <thread>

#if defined(__linux__)
#include <sched.h>
#endif

namespace trillion {
namespace {

std::string machine_identity(const std::string& host) {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (in && std::getline(in, id) && !id.empty()) return "boot:" + id;
  return "host:" + host;
}

void set_cpu(CoreClaim& c, unsigned cpu) {
  if (cpu < 64 * c.cpus.size()) c.cpus[cpu / 64] |= uint64_t(1) << (cpu % 64);
}

}  // namespace

CoreClaim this_process_claim(const std::string& host) {
  CoreClaim c;
  c.machine = std::hash<std::string>{}(machine_identity(host));
  bool known = false;
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (unsigned cpu = 0; cpu < unsigned(CPU_SETSIZE); ++cpu)
      if (CPU_ISSET(cpu, &set)) set_cpu(c, cpu), known = true;
  }
#endif
  if (!known)  // macOS has no affinity: every rank may run on every core
    for (unsigned cpu = 0; cpu < std::max(1u, std::thread::hardware_concurrency()); ++cpu) set_cpu(c, cpu);
  return c;
}

MachineShare machine_share(const std::vector<CoreClaim>& claims, int rank) {
  const CoreClaim& mine = claims.at(size_t(rank));
  std::array<uint64_t, 16> cpus{};
  MachineShare s{0, 0};
  for (const CoreClaim& c : claims) {
    if (c.machine != mine.machine) continue;
    ++s.ranks;
    for (size_t w = 0; w < cpus.size(); ++w) cpus[w] |= c.cpus[w];
  }
  for (uint64_t w : cpus) s.cores += std::popcount(w);
  if (s.cores == 0) s.cores = 1;
  return s;
}

}  // namespace trillion
