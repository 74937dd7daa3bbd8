// CPUID probes for the AVX2 paths. Built without ISA flags so they run anywhere.
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

// AVX-VNNI: CPUID.(EAX=7, ECX=1):EAX bit 4 (Intel Alder Lake and later, AMD
// Zen 5). The VEX form only: AVX512-VNNI alone (Zen 4, Ice Lake) would need
// the EVEX encoding, built with AVX-512 flags, and is not a path here.
bool cpu_has_avx_vnni() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!cpu_has_avx2_fma_f16c()) return false;  // also checks the OS saves YMM state
  if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
  return a & (1u << 4);
}

// AVX-512 F (EBX 16), DQ (17), BW (30), VL (31) and VNNI (ECX 11) in
// CPUID.(EAX=7, ECX=0), and the OS saving the opmask and ZMM state (XCR0
// bits 5-7) besides YMM.
bool cpu_has_avx512_vnni() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!cpu_has_avx2_fma_f16c()) return false;
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & 0xE6u) != 0xE6u) return false;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const unsigned need_b = (1u << 16) | (1u << 17) | (1u << 30) | (1u << 31);
  return (b & need_b) == need_b && (c & (1u << 11));
}

}  // namespace trillion
