// Non-x86 builds: no AVX2 path (the portable kernels run).
#include "common/error.hpp"
#include "kernels/kernel_table.hpp"
#include "kernels/matmul_bf16.hpp"

namespace trillion {

const KernelTable* avx2_kernel_table() { return nullptr; }
bool cpu_has_avx2_fma_f16c() { return false; }
const KernelTable* avx2_vnni_kernel_table() { return nullptr; }
bool cpu_has_avx_vnni() { return false; }
const KernelTable* avx512_kernel_table() { return nullptr; }
bool cpu_has_avx512_vnni() { return false; }
bool cpu_has_avx512_bf16() { return false; }
void matmul_bf16_rows_avx512(const QMatrix&, const Bf16Rows&, float*, int64_t, int64_t, int64_t) {
  throw Error("matmul_bf16: no AVX-512 BF16 kernel in this build");  // bf16_native() is false here
}

}  // namespace trillion
