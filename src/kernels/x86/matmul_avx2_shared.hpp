// What the AVX2 matmul's two paths share (matmul_avx2.cpp: the entry point
// and the direct register-tile path; matmul_avx2_blocked.cpp: the blocked,
// L1-decoded path): the INT4 decoder both use, the common last step of an
// output element (hsum, then the tail columns) and the prefetch loop. In its
// own header so the two paths perform these operations from one text, which
// is what makes their bits equal. Included only by files built with
// -mavx2 -mfma -mf16c; internal linkage, as avx2_formats.hpp.
#pragma once
#include <cstdint>

#include "kernels/x86/avx2_formats.hpp"
#include "kernels/matmul_row_tail.hpp"

namespace trillion::avx2 {

// The blocked path (matmul_avx2_blocked.cpp), for FP8 and INT4 matrices.
void matmul_rows_blocked(const QMatrix& W, const float* x, int64_t n, float* y, int64_t ldy, int64_t r0,
                         int64_t r1);

namespace {

// Smallest n that takes the blocked path; 0: never. For FP8 and INT4 the
// blocked path falls behind the direct tiles at n = 8, is ahead from n = 12
// and gains with n (bench_matmul, 1 thread, 512 x 2048). Where the decode is
// cheap the direct tiles stay ahead or even (BF16, F32, and INT8, whose
// 32-column groups load, fuse and store the totals every 4 steps).
constexpr int64_t blocked_min_tokens(MatFormat f) {
  return f == MatFormat::FP8_B128 || f == MatFormat::INT4_G32 ? 12 : 0;
}

// INT4 as weights, (nibble - 8) * scale = fma(nibble, scale, -8 * scale):
// exact (at most 4 + 8 significant bits), and one operation fewer than
// converting q, then scaling. Decoded per 8 columns, or per 32-column scale
// group with the scale broadcast once (group_scale, load_scaled). kGroup = 0:
// no group accumulators; scale_at = 1, so "times the scale" is exact.
struct Int4Weights {
  static constexpr int64_t kGroup = 0;
  static constexpr int64_t kScaleGroup = Int4Format::kGroup;
  static constexpr int kBits = Int4Format::kBits;
  struct Scale {
    __m256 s, off;  // scale, -8 * scale
  };
  Int4Format f;
  const void* ptr(int64_t r, int64_t c) const { return f.ptr(r, c); }
  Scale group_scale(int64_t r, int64_t c) const {
    const __m256 s = f.scale_vec(r, c);
    return {s, _mm256_mul_ps(s, _mm256_set1_ps(-8.0f))};
  }
  __m256 load_scaled(int64_t r, int64_t c, const Scale& s) const {
    return _mm256_fmadd_ps(f.load_nibbles(r, c), s.s, s.off);
  }
  __m256 load(int64_t r, int64_t c) const { return load_scaled(r, c, group_scale(r, c)); }
  float at(int64_t r, int64_t c) const { return f.at(r, c) * f.scale_at(r, c); }
  float scale_at(int64_t, int64_t) const { return 1.0f; }
};

// y[t][r] = hsum(tot) + the tail columns: the common last step of both paths.
template <class F>
inline void finish(const F& f, int64_t cols, const float* x, float* y, int64_t ldy, int64_t r, int64_t t,
                   __m256 tot) {
  const int64_t cv = cols & ~int64_t(7);
  float v = hsum(tot);
  if (cv < cols) {
    int64_t group0 = 0;  // first column of the group holding column cv
    if constexpr (F::kGroup != 0) group0 = (cv / F::kGroup) * F::kGroup;
    v += tail_sum(f, r, x + t * cols, group0, cv, cols);
  }
  y[t * ldy + r] = v;
}

// Software prefetch of [a, a + len), one hint per 64-byte line. The address
// is an integer: past the matrix it is never dereferenced (prefetches do not fault).
template <_mm_hint Hint>
inline void prefetch_lines(uintptr_t a, uintptr_t len) {
  for (uintptr_t o = 0; o < len; o += 64) _mm_prefetch(reinterpret_cast<const char*>(a + o), Hint);
}

}  // namespace
}  // namespace trillion::avx2
