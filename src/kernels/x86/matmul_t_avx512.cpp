// The transposed matmul (y = x . W: the absorbed attention's q_lat =
// W_UK^T q_nope) with AVX-512, in the avx512 table: INT4 in
// matmul_int4_avx512.cpp, FP8 / INT8 / BF16 here, F32 on the AVX2 kernel.
//
// Why: W_UK stays on the exact float path at decode, and the AVX2 tile (32
// columns, 4 chains per token, one row per fma latency) streamed DeepSeek's
// FP8 W_UK far below the bandwidth, a visible part of a batch-1 step on the
// bench model (bench_model --floor).
//
// Every column is its own chain, for r increasing: acc = fma(value, x[t][r]
// * scale, acc), value and scale as avx2_formats.hpp's decoders give them
// (the FP8 code's value times 2^-8 through fp16, and the block scale times
// 2^8; INT8's q and its group's bf16 scale; BF16's value and 1). A lane per
// column, the same exact values, the same order: the AVX2 table's bits
// (tests/kernels/test_matmul_t.cpp compares them bit for bit). A tile is 128
// columns at one token (8 chains), 64 at two or three.
//
// Built with AVX-512 flags; runs only after the CPUID check (cpu_has_avx512_vnni).
#include <algorithm>
#include <type_traits>

#include "kernels/x86/avx512_float_path.hpp"

namespace trillion::avx2 {

namespace {

using namespace avx512_float;  // the shared tile constants and prefetch

// 16 columns from c of row r as floats: the values load(r, c), load(r, c + 8) give.
inline __m512 load16(const Fp8Format& f, int64_t r, int64_t c) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(f.d + r * f.cols + c));
  const __m256i h =
      _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(b), 7), _mm256_set1_epi16(int16_t(0xBFFF)));
  return _mm512_cvtph_ps(h);
}
inline __m512 load16(const Int8Format& f, int64_t r, int64_t c) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(f.d + r * f.cols + c));
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b));
}
inline __m512 load16(const Bf16Format& f, int64_t r, int64_t c) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(f.d + r * f.cols + c));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// Columns [c, c + 16 V) for tokens [t0, t0 + TT), c a multiple of 32: a
// scale group (FP8 128 columns, INT8 32, BF16 the row) starts at v = 0 or
// where c + 16 v is a multiple of it, so a tile may span groups.
template <class F, int TT, int V>
void cols_tile(const F& f, int64_t rows, int64_t cols, const float* x, float* y, int64_t t0, int64_t c) {
  const uintptr_t ahead = uintptr_t(kPrefetchRows * cols * F::kBits / 8);  // an integer: never dereferenced
  __m512 acc[TT][V];
  for (int t = 0; t < TT; ++t)
    for (int v = 0; v < V; ++v) acc[t][v] = _mm512_setzero_ps();
  for (int64_t r = 0; r < rows; ++r) {
    for (int v = 0; v < V; v += 64 / (F::kBits * 2))  // one 64-byte line per prefetch
      prefetch(address(f.ptr(r, c + 16 * v)) + ahead);
    __m512 xs[TT];
    for (int v = 0; v < V; ++v) {
      if (v == 0 || (F::kGroup != 0 && (c + 16 * v) % F::kGroup == 0)) {
        const float s = f.scale_at(r, c + 16 * v);
        for (int t = 0; t < TT; ++t) xs[t] = _mm512_set1_ps(x[(t0 + t) * rows + r] * s);
      }
      const __m512 w = load16(f, r, c + 16 * v);
      for (int t = 0; t < TT; ++t) acc[t][v] = _mm512_fmadd_ps(w, xs[t], acc[t][v]);
    }
  }
  for (int t = 0; t < TT; ++t)
    for (int v = 0; v < V; ++v) _mm512_storeu_ps(y + (t0 + t) * cols + c + 16 * v, acc[t][v]);
}

template <class F, int TT>
int64_t token_tile(const F& f, const QMatrix& W, const float* x, float* y, int64_t t0, int64_t c0, int64_t c1) {
  const int64_t end = std::min(c1, W.cols) & ~int64_t(31);  // whole 32-column blocks (the AVX2 contract's c0)
  int64_t c = c0;
  if constexpr (TT == 1)
    for (; c + 128 <= end; c += 128) cols_tile<F, TT, 8>(f, W.rows, W.cols, x, y, t0, c);
  for (; c + 64 <= end; c += 64) cols_tile<F, TT, 4>(f, W.rows, W.cols, x, y, t0, c);
  for (; c + 32 <= end; c += 32) cols_tile<F, TT, 2>(f, W.rows, W.cols, x, y, t0, c);
  return c;
}

}  // namespace

void matmul_t_cols_avx512(const QMatrix& W, const float* x, int64_t n, float* y, int64_t c0, int64_t c1) {
  if (W.format == MatFormat::INT4_G32) return int4_matmul_t_cols_avx512(W, x, n, y, c0, c1);
  if (W.format == MatFormat::F32) return matmul_t_cols(W, x, n, y, c0, c1);
  int64_t done = c0;
  with_decoder(W, [&](const auto& f) {
    using F = std::decay_t<decltype(f)>;
    if constexpr (!std::is_same_v<F, F32Format> && !std::is_same_v<F, Int4Format>) {
      int64_t t = 0;
      for (; t + kMaxToks <= n; t += kMaxToks) done = token_tile<F, kMaxToks>(f, W, x, y, t, c0, c1);
      if (n - t == 2) done = token_tile<F, 2>(f, W, x, y, t, c0, c1);
      if (n - t == 1) done = token_tile<F, 1>(f, W, x, y, t, c0, c1);
    }
  });
  // The columns past the last whole 32: the AVX2 kernel (its tiles and scalar tail, the same chains).
  if (done < c1) matmul_t_cols(W, x, n, y, done, c1);
}

}  // namespace trillion::avx2
