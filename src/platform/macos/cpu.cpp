#include "platform/cpu.hpp"

#include <sys/sysctl.h>

#include <algorithm>
#include <thread>

namespace trillion::platform {

namespace {

// An integer sysctl, 0 when the name does not exist here.
int sysctl_int(const char* name) {
  int v = 0;
  size_t len = sizeof v;
  return sysctlbyname(name, &v, &len, nullptr, 0) == 0 ? v : 0;
}

}  // namespace

int compute_cores() {
  // perflevel0 is the fastest level (the performance cores) on Apple silicon
  // (macOS 12 and later); hw.physicalcpu counts every core.
  for (const char* name : {"hw.perflevel0.physicalcpu", "hw.physicalcpu"})
    if (const int v = sysctl_int(name); v > 0) return v;
  return int(std::max(1u, std::thread::hardware_concurrency()));
}

bool arm_has_dotprod() { return sysctl_int("hw.optional.arm.FEAT_DotProd") != 0; }

bool arm_has_i8mm() { return sysctl_int("hw.optional.arm.FEAT_I8MM") != 0; }

bool arm_has_bf16() { return sysctl_int("hw.optional.arm.FEAT_BF16") != 0; }

bool allowed_cpus(std::vector<unsigned>&) { return false; }

std::string boot_id() {
  char id[64] = {};
  size_t len = sizeof id - 1;
  if (sysctlbyname("kern.bootsessionuuid", id, &len, nullptr, 0) != 0) return "";
  return std::string(id);
}

}  // namespace trillion::platform
