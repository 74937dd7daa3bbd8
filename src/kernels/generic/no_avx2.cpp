// Non-x86 builds: no AVX2 path (the portable kernels run).
#include "kernels/kernel_table.hpp"

namespace trillion {

const KernelTable* avx2_kernel_table() { return nullptr; }
bool cpu_has_avx2_fma_f16c() { return false; }
const KernelTable* avx2_vnni_kernel_table() { return nullptr; }
bool cpu_has_avx_vnni() { return false; }
const KernelTable* avx512_kernel_table() { return nullptr; }
bool cpu_has_avx512_vnni() { return false; }

}  // namespace trillion
