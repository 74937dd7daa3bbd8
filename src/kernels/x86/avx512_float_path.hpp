// What the float path's AVX-512 kernels (matmul_t_avx512.cpp,
// matmul_int4_avx512.cpp) share: the AVX2 entry points they hand leftovers
// to, the token tile and the prefetch distance. Include only from files
// built with AVX-512 flags; they run only after the CPUID check
// (cpu_has_avx512_vnni).
#pragma once
#if defined(__GNUC__) && !defined(__clang__)
// GCC reads the zeroed accumulator arrays of the templated tiles as possibly
// uninitialized through the intrinsics; they are all set before use.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <cstdint>

#include "kernels/x86/avx2_formats.hpp"

namespace trillion::avx2 {

// The AVX2 kernels (matmul_t_avx2.cpp, matmul_avx2.cpp): shapes and formats
// the AVX-512 tiles leave, with the same bits per element.
void matmul_t_cols(const QMatrix& W, const float* x, int64_t n, float* y, int64_t c0, int64_t c1);
void matmul_rows(const QMatrix& W, const float* x, int64_t n, float* y, int64_t ldy, int64_t r0, int64_t r1);
// INT4's transposed product (matmul_int4_avx512.cpp).
void int4_matmul_t_cols_avx512(const QMatrix& W, const float* x, int64_t n, float* y, int64_t c0, int64_t c1);

namespace avx512_float {

// Tokens per tile: the decode shapes (n <= 3) the kernels are for.
constexpr int kMaxToks = 3;
// Rows the transposed tiles prefetch ahead: the first tile over a head's
// block reads it from memory, at a stride of a row.
constexpr int64_t kPrefetchRows = 16;

// One prefetch hint. The address is an integer: past the matrix it is never
// dereferenced (prefetches do not fault), and no pointer past an array is formed.
inline void prefetch(uintptr_t a) { _mm_prefetch(reinterpret_cast<const char*>(a), _MM_HINT_T0); }
template <class T>
inline uintptr_t address(const T* p) {
  return reinterpret_cast<uintptr_t>(p);
}

}  // namespace avx512_float
}  // namespace trillion::avx2
