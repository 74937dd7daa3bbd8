// Non-arm64 builds: no NEON path.
#include "kernels/kernel_table.hpp"

namespace trillion {

const KernelTable* neon_kernel_table() { return nullptr; }
bool cpu_has_neon() { return false; }

}  // namespace trillion
