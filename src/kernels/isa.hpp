// Which instruction-set path the kernels use. Chosen once per process (the
// best the CPU has, or TRILLION_ISA=portable|avx2|neon) and never changed, so a
// process computes every value the same way (DESIGN: determinism).
#pragma once
#include <cstdint>

namespace trillion {

enum class KernelIsa : uint8_t {
  portable,  // plain C++ with explicit 8-lane accumulators; every target
  avx2,      // x86-64 AVX2 + FMA + F16C
  neon,      // arm64 Advanced SIMD (matmul; matmul_t, dot, axpy are the portable ones)
};

const char* to_string(KernelIsa isa);

// Compiled into this binary and supported by this CPU.
bool kernel_isa_available(KernelIsa isa);

// The process's path: TRILLION_ISA if set (throws Error when unavailable or
// unknown), else the best available. Fixed at first call.
KernelIsa kernel_isa();

}  // namespace trillion
