// The per-ISA kernel entry points. Each ISA file fills one table; isa.cpp
// picks one per process. Public kernels (matmul.hpp, vector_ops.hpp) call
// through the active table; tests call each table to compare paths.
//
// Contract of every entry (docs/determinism.md): an output
// element's bits depend only on its own inputs - never on n, on which rows or
// columns a call covers, or on what else x holds. Reductions run in a fixed
// blocking and order; callers split work over outputs only.
#pragma once
#include <cstdint>

#include "kernels/isa.hpp"
#include "kernels/qmatrix.hpp"

namespace trillion {

struct Q8Rows;  // matmul_q8.hpp

struct KernelTable {
  // y[t*ldy + r] = sum_c W[r][c] * x[t*W.cols + c]  for t < n, r in [r0, r1).
  void (*matmul_rows)(const QMatrix& W, const float* x, int64_t n, float* y, int64_t ldy,
                      int64_t r0, int64_t r1);
  // y[t*W.cols + c] = sum_r x[t*W.rows + r] * W[r][c]  for t < n, c in [c0, c1),
  // r in increasing order. c0 a multiple of 32, c1 a multiple of 32 or W.cols
  // (scale groups stay whole; a column's code path depends on the column only).
  void (*matmul_t_cols)(const QMatrix& W, const float* x, int64_t n, float* y,
                        int64_t c0, int64_t c1);
  // sum_i a[i] * b[i], fixed blocking.
  float (*dot)(const float* a, const float* b, int64_t n);
  // y[i] += alpha * x[i].
  void (*axpy)(float alpha, const float* x, float* y, int64_t n);
  // The integer-dot path (matmul_q8.hpp defines both to the bit): one
  // activation row x[cols] quantized into q[groups * 32] and d[groups]; and
  // y[t*ldy + r] = (W . xq)[t][r] for t < xq.n, r in [r0, r1), W INT8_G32 or INT4_G32.
  void (*quantize_q8_row)(const float* x, int64_t cols, int8_t* q, float* d);
  void (*matmul_q8_rows)(const QMatrix& W, const Q8Rows& xq, float* y, int64_t ldy, int64_t r0, int64_t r1);
  // Many dots and axpys over shared operands (attention over a cache block:
  // every head against every position), each output with exactly the bits
  // of this table's dot / axpy (tile_loops.hpp defines them as loops):
  //   out[i*ldo + j] = dot(a + i*lda, b + j*ldb, n)       for i < na, j < nb;
  //   for i < na, j < nb in order: axpy(p[i*ldp + j], x + j*ldx, y + i*ldy, n).
  // b_next (may be null) is a hint: where the b of the caller's next dot_tile
  // starts (same ldb and nb), for a kernel to prefetch while it computes;
  // never dereferenced, no effect on any output.
  void (*dot_tile)(const float* a, int64_t lda, int64_t na, const float* b, int64_t ldb, int64_t nb, int64_t n,
                   float* out, int64_t ldo, const float* b_next);
  void (*axpy_tile)(const float* p, int64_t ldp, int64_t na, const float* x, int64_t ldx, int64_t nb, float* y,
                    int64_t ldy, int64_t n);
  // y[i] = exp_f32(x[i]) (expf.hpp: glibc's expf, bit for bit) for i < n; y may alias x.
  void (*exp_each)(const float* x, float* y, int64_t n);
};

const KernelTable& portable_kernel_table();
const KernelTable* avx2_kernel_table();  // null when not compiled in (non-x86 builds)
bool cpu_has_avx2_fma_f16c();            // false on non-x86 builds
// The AVX2 table with the integer-dot product on AVX-VNNI (null on non-x86 builds).
const KernelTable* avx2_vnni_kernel_table();
bool cpu_has_avx_vnni();                 // AVX-VNNI (VEX vpdpbusd) with OS YMM support; false on non-x86 builds
// The AVX2 table with the integer-dot product on AVX-512 VNNI (null on non-x86 builds).
const KernelTable* avx512_kernel_table();
bool cpu_has_avx512_vnni();  // AVX-512 F, BW, DQ, VL, VNNI with OS ZMM support; false on non-x86 builds
bool cpu_has_avx512_bf16();  // AVX-512 BF16 (vdpbf16ps) besides the above; false on non-x86 builds
const KernelTable* neon_kernel_table();  // null when not compiled in (non-arm64 builds)
bool cpu_has_neon();                     // false on non-arm64 builds
// The NEON table with the INT4 integer-dot product on SMMLA (null on non-arm64 builds).
const KernelTable* neon_i8mm_kernel_table();
bool cpu_has_neon_i8mm();  // FEAT_I8MM and dotprod (HWCAP2 / sysctl); false on non-arm64 builds

// The table of `isa` (must be available) and of the process's path.
const KernelTable& kernel_table(KernelIsa isa);
const KernelTable& active_kernel_table();

}  // namespace trillion
