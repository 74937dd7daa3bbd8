// CPU features and topology, as each operating system reports them: Linux
// through /sys, /proc and the auxiliary vector, macOS through sysctl. Policy
// (how many threads, which kernel path) stays with the callers.
#pragma once
#include <string>
#include <vector>

namespace trillion::platform {

// The cores a compute pool defaults to, at least 1. Decode is
// bandwidth-bound, and a slower or shared core only competes for the same
// memory and FMA units. Linux: the physical cores (distinct package and core
// ids in /sys/devices/system/cpu; SMT siblings count once), or the hardware
// threads when the topology is hidden. macOS: the performance cores
// (sysctl hw.perflevel0.physicalcpu on Apple silicon, as llama.cpp; an
// efficiency core streams and computes at a fraction of their rate), or
// hw.physicalcpu on systems without performance levels.
int compute_cores();

// arm64 CPU features the kernels choose a path by (Linux: AT_HWCAP /
// AT_HWCAP2; macOS: sysctl hw.optional.arm.FEAT_*). false on other ISAs.
bool arm_has_dotprod();  // FEAT_DotProd: SDOT
bool arm_has_i8mm();     // FEAT_I8MM: SMMLA
bool arm_has_bf16();     // FEAT_BF16: BFDOT, BFMMLA (Apple M2 and later, Neoverse V1/N2 and later)

// The CPUs this process may run on (Linux: sched_getaffinity), in `cpus`.
// false where the OS has no affinity (macOS: any thread may run on any core).
bool allowed_cpus(std::vector<unsigned>& cpus);

// The running kernel's boot identity (Linux: /proc/sys/kernel/random/boot_id;
// macOS: sysctl kern.bootsessionuuid), "" when unknown. Processes that see
// the same one share a machine's cores, whatever their host names say.
std::string boot_id();

}  // namespace trillion::platform
