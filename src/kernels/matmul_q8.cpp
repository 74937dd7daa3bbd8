// Drivers of the integer-dot path: quantize rows, split output rows over
// threads, call the process's kernel table (any split gives the same bits).
#include "kernels/matmul_q8.hpp"

#include <algorithm>
#include <string>

#include "common/error.hpp"
#include "kernels/kernel_table.hpp"

#if defined(__SSE2__)
#include <emmintrin.h>
#elif defined(__ARM_NEON)
#include <arm_neon.h>
#endif

namespace trillion {
namespace {

constexpr int64_t kRowTile = 4;        // rows per work unit
constexpr int64_t kMinWork = 1 << 17;  // multiply-adds per thread chunk worth a wake-up

int64_t row_units(const QMatrix& W) { return (W.rows + kRowTile - 1) / kRowTile; }
// Row units per thread chunk: at least kMinWork multiply-adds.
int64_t grain_for(int64_t cols, int64_t n) {
  return std::max<int64_t>(1, kMinWork / std::max<int64_t>(1, kRowTile * cols * n));
}

void check_q8(const QMatrix& W, const Q8Rows& xq) {
  check_qmatrix(W);
  if (!q8_supports(W.format)) throw Error("matmul_q8: weight format has no integer-dot path");
  if (xq.cols != W.cols)
    throw Error("matmul_q8: activations have " + std::to_string(xq.cols) + " columns, weights " +
                std::to_string(W.cols));
  if (W.format == MatFormat::INT4_G32 &&
      (xq.pairs != (xq.groups + 1) / 2 || xq.pair.size() != size_t(xq.n * xq.pairs)))
    throw Error("matmul_q8: INT4 weights need the activations' pair layout (quantize_q8 for INT4_G32)");
}

void resize(Q8Rows& out, int64_t n, int64_t cols) {
  out.n = n;
  out.cols = cols;
  out.groups = (cols + kQ8Group - 1) / kQ8Group;
  out.q.resize(size_t(n * out.groups * kQ8Group));
  out.d.resize(size_t(n * out.groups));
}

void quantize_with(const KernelTable& k, const float* x, int64_t n, int64_t cols, Q8Rows& out, MatFormat w) {
  resize(out, n, cols);
  for (int64_t t = 0; t < n; ++t)
    k.quantize_q8_row(x + t * cols, cols, out.q.data() + t * out.groups * kQ8Group, out.d.data() + t * out.groups);
  out.pairs = 0;
  if (w == MatFormat::INT4_G32) q8_pair_layout(out);
}

}  // namespace

bool q8_supports(MatFormat f) { return f == MatFormat::INT8_G32 || f == MatFormat::INT4_G32; }

void quantize_q8(const float* x, int64_t n, int64_t cols, Q8Rows& out, MatFormat for_weights) {
  quantize_with(active_kernel_table(), x, n, cols, out, for_weights);
}

void quantize_q8_ref(const float* x, int64_t n, int64_t cols, Q8Rows& out, MatFormat for_weights) {
  quantize_with(portable_kernel_table(), x, n, cols, out, for_weights);
}

namespace {
// Group g's half (h = g % 2) of its pair: even and odd columns, 8 * the sum
// of each 8 columns, d four times. A data layout and exact integer sums:
// every form gives the same bytes. Vector forms because it runs on the
// calling thread before every INT4 product while the pool waits (2048
// columns: ~1 us scalar); SSE2 and NEON are in every x86-64 / arm64 CPU.
inline void pair_half(const int8_t* qg, float d, Q8Pair& o, int h) {
#if defined(__SSE2__)
  const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qg));
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qg + 16));
  const __m128i lo = _mm_set1_epi16(0x00ff);  // packus of values 0..255 is exact
  _mm_storeu_si128(reinterpret_cast<__m128i*>(o.e + 16 * h),
                   _mm_packus_epi16(_mm_and_si128(a, lo), _mm_and_si128(b, lo)));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(o.o + 16 * h), _mm_packus_epi16(_mm_srli_epi16(a, 8), _mm_srli_epi16(b, 8)));
  // Sums of 8 signed bytes: |q + 128| summed by psadbw, less 8 * 128.
  const __m128i bias = _mm_set1_epi8(int8_t(-128)), zero = _mm_setzero_si128();
  const __m128i sa = _mm_sad_epu8(_mm_xor_si128(a, bias), zero), sb = _mm_sad_epu8(_mm_xor_si128(b, bias), zero);
  const int32_t sums[4] = {_mm_cvtsi128_si32(sa), _mm_cvtsi128_si32(_mm_srli_si128(sa, 8)), _mm_cvtsi128_si32(sb),
                           _mm_cvtsi128_si32(_mm_srli_si128(sb, 8))};
  for (int j = 0; j < 4; ++j) o.c[4 * h + j] = 8 * (sums[j] - 8 * 128);
#elif defined(__ARM_NEON)
  const int8x16x2_t eo = vld2q_s8(qg);  // de-interleaves: even columns, odd columns
  vst1q_s8(o.e + 16 * h, eo.val[0]);
  vst1q_s8(o.o + 16 * h, eo.val[1]);
  const int32x4_t a = vpaddlq_s16(vpaddlq_s8(vld1q_s8(qg))), b = vpaddlq_s16(vpaddlq_s8(vld1q_s8(qg + 16)));
  vst1q_s32(o.c + 4 * h, vshlq_n_s32(vpaddq_s32(a, b), 3));  // sums of 4, paired: sums of 8, times 8
#else
  for (int i = 0; i < 16; ++i) {
    o.e[16 * h + i] = qg[2 * i];
    o.o[16 * h + i] = qg[2 * i + 1];
  }
  for (int j = 0; j < 4; ++j) {
    int32_t sum = 0;
    for (int c = 0; c < 8; ++c) sum += qg[8 * j + c];
    o.c[4 * h + j] = 8 * sum;
  }
#endif
  for (int j = 0; j < 4; ++j) o.d[4 * h + j] = d;
}
}  // namespace

void q8_pair_layout(Q8Rows& xq) {
  xq.pairs = (xq.groups + 1) / 2;
  xq.pair.resize(size_t(xq.n * xq.pairs));
  for (int64_t t = 0; t < xq.n; ++t) {
    const int8_t* q = xq.row_q(t);
    const float* d = xq.row_d(t);
    Q8Pair* out = xq.pair.data() + t * xq.pairs;
    for (int64_t g = 0; g < xq.groups; ++g) pair_half(q + g * kQ8Group, d[g], out[g / 2], int(g % 2));
    if (xq.groups % 2) {  // the lone last group's missing partner
      Q8Pair& o = out[xq.groups / 2];
      std::fill_n(o.e + 16, 16, int8_t(0));
      std::fill_n(o.o + 16, 16, int8_t(0));
      std::fill_n(o.c + 4, 4, 0);
      std::fill_n(o.d + 4, 4, 0.0f);
    }
  }
}

void q8_gather(const Q8Rows& src, const int64_t* rows, int64_t m, Q8Rows& out) {
  resize(out, m, src.cols);
  out.pairs = src.pairs;
  out.pair.resize(size_t(m * src.pairs));
  for (int64_t a = 0; a < m; ++a) {
    const int64_t t = rows[a];
    std::copy_n(src.row_q(t), src.groups * kQ8Group, out.q.data() + a * out.groups * kQ8Group);
    std::copy_n(src.row_d(t), src.groups, out.d.data() + a * out.groups);
    std::copy_n(src.row_pairs(t), src.pairs, out.pair.data() + a * out.pairs);
  }
}

void matmul_q8(const QMatrix& W, const Q8Rows& xq, float* y, ThreadPool& pool) {
  check_q8(W, xq);
  const KernelTable& k = active_kernel_table();
  pool.parallel_for(row_units(W), grain_for(W.cols, xq.n), [&](int64_t b, int64_t e) {
    k.matmul_q8_rows(W, xq, y, W.rows, b * kRowTile, std::min(W.rows, e * kRowTile));
  });
}

void matmul_q8_pair(const QMatrix& A, float* ya, const QMatrix& B, float* yb, const Q8Rows& xq, ThreadPool& pool) {
  check_q8(A, xq);
  check_q8(B, xq);
  const KernelTable& k = active_kernel_table();
  const int64_t ua = row_units(A);
  pool.parallel_for(ua + row_units(B), grain_for(A.cols, xq.n), [&](int64_t b, int64_t e) {
    if (b < ua) k.matmul_q8_rows(A, xq, ya, A.rows, b * kRowTile, std::min(A.rows, std::min(e, ua) * kRowTile));
    if (e > ua) k.matmul_q8_rows(B, xq, yb, B.rows, (std::max(b, ua) - ua) * kRowTile, std::min(B.rows, (e - ua) * kRowTile));
  });
}

void matmul_q8_serial(const QMatrix& W, const Q8Rows& xq, float* y, int64_t ldy) {
  check_q8(W, xq);
  active_kernel_table().matmul_q8_rows(W, xq, y, ldy, 0, W.rows);
}

void matmul_q8_ref(const QMatrix& W, const Q8Rows& xq, float* y) {
  check_q8(W, xq);
  portable_kernel_table().matmul_q8_rows(W, xq, y, W.rows, 0, W.rows);
}

}  // namespace trillion
