// Non-arm64 builds: no NEON path.
#include "common/error.hpp"
#include "kernels/kernel_table.hpp"
#include "kernels/matmul_bf16.hpp"

namespace trillion {

const KernelTable* neon_kernel_table() { return nullptr; }
bool cpu_has_neon() { return false; }
const KernelTable* neon_i8mm_kernel_table() { return nullptr; }
bool cpu_has_neon_i8mm() { return false; }
void matmul_bf16_rows_bfmmla(const QMatrix&, const Bf16Rows&, float*, int64_t, int64_t, int64_t) {
  throw Error("matmul_bf16: no BFMMLA kernel in this build");  // bf16_native() is false here
}
void bfmmla_once(const uint16_t*, const uint16_t*, float*) { throw Error("bfmmla_once: not an arm64 build"); }

}  // namespace trillion
