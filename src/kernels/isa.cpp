#include "kernels/isa.hpp"

#include <cstdlib>
#include <string>

#include "common/error.hpp"
#include "kernels/kernel_table.hpp"

namespace trillion {
namespace {

KernelIsa choose_isa() {
  const char* env = std::getenv("TRILLION_ISA");
  const std::string want = env ? env : "";
  if (want.empty() || want == "best") {
    for (KernelIsa isa : kAllKernelIsas)
      if (kernel_isa_available(isa)) return isa;
    return KernelIsa::portable;
  }
  for (KernelIsa isa : kAllKernelIsas) {
    if (want != to_string(isa)) continue;
    if (!kernel_isa_available(isa))
      throw Error("TRILLION_ISA=" + want + ": not available on this CPU or build");
    return isa;
  }
  throw Error("TRILLION_ISA='" + want + "': expected portable, avx2, avx2-vnni, avx512, neon, neon-i8mm or best");
}

}  // namespace

const char* to_string(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::portable: return "portable";
    case KernelIsa::avx2: return "avx2";
    case KernelIsa::avx2_vnni: return "avx2-vnni";
    case KernelIsa::avx512: return "avx512";
    case KernelIsa::neon: return "neon";
    case KernelIsa::neon_i8mm: return "neon-i8mm";
  }
  return "?";
}

bool kernel_isa_available(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::portable: return true;
    case KernelIsa::avx2: return avx2_kernel_table() != nullptr && cpu_has_avx2_fma_f16c();
    case KernelIsa::avx2_vnni:
      return avx2_vnni_kernel_table() != nullptr && cpu_has_avx2_fma_f16c() && cpu_has_avx_vnni();
    case KernelIsa::avx512:
      return avx512_kernel_table() != nullptr && cpu_has_avx2_fma_f16c() && cpu_has_avx512_vnni();
    case KernelIsa::neon: return neon_kernel_table() != nullptr && cpu_has_neon();
    case KernelIsa::neon_i8mm: return neon_i8mm_kernel_table() != nullptr && cpu_has_neon_i8mm();
  }
  return false;
}

KernelIsa kernel_isa() {
  static const KernelIsa isa = choose_isa();
  return isa;
}

const KernelTable& kernel_table(KernelIsa isa) {
  if (!kernel_isa_available(isa)) throw Error(std::string("kernel path ") + to_string(isa) + " is not available");
  switch (isa) {
    case KernelIsa::avx2: return *avx2_kernel_table();
    case KernelIsa::avx2_vnni: return *avx2_vnni_kernel_table();
    case KernelIsa::avx512: return *avx512_kernel_table();
    case KernelIsa::neon: return *neon_kernel_table();
    case KernelIsa::neon_i8mm: return *neon_i8mm_kernel_table();
    case KernelIsa::portable: break;
  }
  return portable_kernel_table();
}

const KernelTable& active_kernel_table() {
  static const KernelTable& table = kernel_table(kernel_isa());
  return table;
}

}  // namespace trillion
