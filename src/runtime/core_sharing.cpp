#include "runtime/core_sharing.hpp"

#include <algorithm>
#include <bit>
#include <functional>
#include <thread>
#include <vector>

#include "platform/cpu.hpp"

namespace trillion {
namespace {

std::string machine_identity(const std::string& host) {
  const std::string id = platform::boot_id();
  return id.empty() ? "host:" + host : "boot:" + id;
}

void set_cpu(CoreClaim& c, unsigned cpu) {
  if (cpu < 64 * c.cpus.size()) c.cpus[cpu / 64] |= uint64_t(1) << (cpu % 64);
}

}  // namespace

CoreClaim this_process_claim(const std::string& host) {
  CoreClaim c;
  c.machine = std::hash<std::string>{}(machine_identity(host));
  std::vector<unsigned> allowed;
  const bool known = platform::allowed_cpus(allowed);
  for (unsigned cpu : allowed) set_cpu(c, cpu);
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
