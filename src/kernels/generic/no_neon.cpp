// Non-arm64 builds: no NEON path.
#include "kernels/kernel_table.hpp"

namespace trillion {

const KernelTable* neon_kernel_table() { return nullptr; }
bool cpu_has_neon() { return false; }
const KernelTable* neon_i8mm_kernel_table() { return nullptr; }
bool cpu_has_neon_i8mm() { return false; }

}  // namespace trillion
