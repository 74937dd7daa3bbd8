// The kernel paths a test binary cannot run here, said out loud: a path that
// is not built for this architecture or not supported by this CPU is skipped
// by every per-path loop, and the output must show it (neon on x86-64 is
// covered by kernels_arm64 under qemu; avx2 needs an AVX2+FMA+F16C CPU).
#pragma once
#include <cstdio>

#include "kernels/isa.hpp"

namespace trillion::test {

inline void report_skipped_isas() {
  for (KernelIsa isa : kAllKernelIsas)
    if (!kernel_isa_available(isa))
      std::printf("SKIPPED: the %s kernel path (not built for this architecture or not supported by this CPU)\n",
                  to_string(isa));
  std::fflush(stdout);
}

}  // namespace trillion::test
