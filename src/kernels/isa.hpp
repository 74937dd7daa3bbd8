// Which instruction-set path the kernels use. Chosen once per process (the
// best the CPU has, or TRILLION_ISA=portable|avx2|avx2-vnni|avx512|neon|neon-i8mm) and never changed, so a
// process computes every value the same way (docs/determinism.md).
#pragma once
#include <array>
#include <cstdint>

namespace trillion {

enum class KernelIsa : uint8_t {
  portable,  // plain C++ with explicit 8-lane accumulators; every target
  avx2,      // x86-64 AVX2 + FMA + F16C
  avx2_vnni, // avx2 with AVX-VNNI (vpdpbusd) for the integer-dot path; the rest is avx2's
  avx512,    // avx2 with AVX-512 VNNI for the integer-dot path (two tokens per zmm); the rest is avx2's
  neon,      // arm64 Advanced SIMD (integer-dot path on SDOT when the CPU has dotprod)
  neon_i8mm, // neon with SMMLA (FEAT_I8MM) for INT4 integer-dot products, two tokens per instruction
};

// Every path, in the order TRILLION_ISA=best prefers them (best first; portable last).
inline constexpr std::array<KernelIsa, 6> kAllKernelIsas = {KernelIsa::avx512,    KernelIsa::avx2_vnni,
                                                            KernelIsa::avx2,      KernelIsa::neon_i8mm,
                                                            KernelIsa::neon,      KernelIsa::portable};

const char* to_string(KernelIsa isa);

// Compiled into this binary and supported by this CPU.
bool kernel_isa_available(KernelIsa isa);

// The process's path: TRILLION_ISA if set (throws Error when unavailable or
// unknown), else the best available. Fixed at first call.
KernelIsa kernel_isa();

}  // namespace trillion
