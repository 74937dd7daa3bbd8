// CPUID probe for the AVX2 path. Built without ISA flags so it runs anywhere.
#include <cpuid.h>

#include "kernels/kernel_table.hpp"

namespace trillion {

bool cpu_has_avx2_fma_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  const bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28),
             f16c = c & (1u << 29);
  if (!(fma && osxsave && avx && f16c)) return false;
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & 0x6u) != 0x6u) return false;  // OS saves XMM and YMM state
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return b & (1u << 5);  // AVX2
}

}  // namespace trillion
