// The integer-dot product on AVX-512 VNNI for several tokens (INT8 from 5,
// INT4 from 9: matmul_q8_rows_avx512 chooses): 16
// output rows per zmm ("panels"), one output row per 32-bit lane, instead of
// the definition's 8 lanes of one output per ymm (matmul_q8_avx512.cpp).
//
// Why: matmul_q8.hpp's definition spends, per 4 columns of one output, a
// float conversion and an fma besides the integer dot, and in the 8-lane
// layout also a scale multiply (s_g = weight scale x d_g, a value per row,
// group and token) and the shuffles that put two tokens in one zmm. At
// n = 32 that tile ran at 11% of this CPU's vpdpbusd peak. Here lane i of
// accumulator k holds the definition's acc_k of row r0 + i: the 8 accumulators
// of a token are 8 zmm, the scale multiply serves 16 rows at once, and the
// activations enter as 32-bit broadcasts straight from the quantized rows
// (vpdpbusd's memory-broadcast operand), so per 4 columns of 16 outputs the
// work is one vpdpbusd, one conversion and one fma: the definition's floor.
//
// The price is a transpose of the weights: 16 rows' dword k of a group into
// one zmm (panel_transpose: 8 inserts and 24 two-source permutes per 16 rows
// and group), made once per call into a per-thread buffer and then read by
// every token, so it is amortized over n (measured: docs/kernels.md). Rows
// past the last whole panel of a thread's range, and n = 1, stay on
// matmul_q8_avx512.cpp's tiles.
//
// Bits: every output performs the definition's operations in its order
// (exact int32 lane sums, s_g = float(ws) * d_g rounded once, one fma per
// lane and group in group order, the final tree
// ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7))), lane-wise across 16
// rows: the same bits as every other tile (tests/kernels compare them).
//
// Built with AVX-512 flags (as matmul_q8_avx512.cpp); runs only after the
// CPUID check (cpu_has_avx512_vnni).
#include "kernels/x86/avx512_intrinsics.hpp"  // first: <immintrin.h>, GCC 12's warnings from it silenced

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/matmul_q8.hpp"
#include "kernels/named_regs.hpp"

namespace trillion::avx2 {
namespace {

constexpr int kPanelRows = 16;

// One stage of the 16 x 8 dword transpose swaps register-index bit B with
// lane-index bit B across the 8 registers: after it, the element at
// (register m, lane j) is the one that was at (m with bit B := bit B of j,
// j with bit B := bit B of m). Its two vpermt2d index vectors: lane j of
// the register with bit B clear takes lane j & ~(1 << B) of the register
// whose bit B is lane j's (bit 4 of an index picks the second source), the
// register with bit B set lane j | (1 << B).
struct SwapIndex {
  alignas(64) int32_t lo[3][16], hi[3][16];
  constexpr SwapIndex() : lo{}, hi{} {
    for (int b = 0; b < 3; ++b)
      for (int j = 0; j < 16; ++j) {
        lo[b][j] = (((j >> b) & 1) << 4) | (j & ~(1 << b));
        hi[b][j] = (((j >> b) & 1) << 4) | (j | (1 << b));
      }
  }
};
constexpr SwapIndex kSwap;

template <int B>
[[gnu::always_inline]] inline void swap_bits(__m512i (&x)[8]) {
  const __m512i ilo = _mm512_load_si512(kSwap.lo[B]), ihi = _mm512_load_si512(kSwap.hi[B]);
  __m512i y[8];
  for (int m = 0; m < 8; ++m) {
    if (m & (1 << B)) continue;
    const int m1 = m | (1 << B);
    y[m] = _mm512_permutex2var_epi32(x[m], ilo, x[m1]);
    y[m1] = _mm512_permutex2var_epi32(x[m], ihi, x[m1]);
  }
  for (int m = 0; m < 8; ++m) x[m] = y[m];
}

// rows[i] (i < 16): 32 bytes each. x[k] lane i = dword k of rows[i].
// Register m starts as rows m and m + 8 (row bit 3 = lane bit 3); three
// stages move row bits 2, 1, 0 into lane bits 2, 1, 0 and the dword index
// into the register index.
[[gnu::always_inline]] inline void panel_transpose(const uint8_t* const* rows, __m512i (&x)[8]) {
  for (int m = 0; m < 8; ++m)
    x[m] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[m]))),
                              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[m + 8])), 1);
  swap_bits<2>(x);
  swap_bits<1>(x);
  swap_bits<0>(x);
}

// The per-thread buffer a panel is transposed into (64-byte aligned).
struct alignas(64) Line {
  uint8_t bytes[64];
};
struct PanelBuffer {
  std::vector<Line> lines;  // INT8: [groups][8]; INT4: [pairs][16] (lo nibbles k = 0..7, then hi)
  __m512i* w() { return reinterpret_cast<__m512i*>(lines.data()); }
  const __m512i* w() const { return reinterpret_cast<const __m512i*>(lines.data()); }
  std::vector<float> s;    // [groups][16]: the 16 rows' weight scales as floats
};
// Kept at its largest size for the thread's life, as `starts` below: per
// pool thread 16 x cols bytes of weights and scales, and 64 x cols bytes of
// lane starts (DeepSeek-V3's 18432-column down projection: 0.3 + 1.2 MB).
PanelBuffer& panel_buffer() {
  thread_local PanelBuffer b;
  return b;
}

// The 16 rows' scales of `groups` groups as floats, group-major (s[g * 16
// + i] is row r0 + i's), 16 groups at a time: the transpose gives lane i of
// x[k] = row i's bf16 scales of groups 16c + 2k and 16c + 2k + 1, whose
// floats are the low half shifted up and the high half masked. A last chunk
// of fewer than 16 groups is copied out first (never read past a row).
void panel_scales(const QMatrix& W, int64_t r0, int64_t groups, std::vector<float>& s) {
  s.resize(size_t((groups + 15) / 16 * 16 * kPanelRows));
  const uint16_t* sc = static_cast<const uint16_t*>(W.scale) + r0 * W.scale_cols;
  const __m512i top = _mm512_set1_epi32(int32_t(0xFFFF0000u));
  const uint8_t* rows[kPanelRows];
  alignas(32) uint16_t pad[kPanelRows][16] = {};
  for (int64_t c = 0; c < groups; c += 16) {
    for (int i = 0; i < kPanelRows; ++i) {
      rows[i] = reinterpret_cast<const uint8_t*>(sc + i * W.scale_cols + c);
      if (c + 16 > groups) {
        std::memcpy(pad[i], rows[i], size_t(groups - c) * 2);
        rows[i] = reinterpret_cast<const uint8_t*>(pad[i]);
      }
    }
    __m512i x[8];
    panel_transpose(rows, x);
    float* out = s.data() + c * kPanelRows;
    for (int k = 0; k < 8; ++k) {
      _mm512_storeu_ps(out + (2 * k) * kPanelRows, _mm512_castsi512_ps(_mm512_slli_epi32(x[k], 16)));
      _mm512_storeu_ps(out + (2 * k + 1) * kPanelRows, _mm512_castsi512_ps(_mm512_and_si512(x[k], top)));
    }
  }
}

using F32x16 = float __attribute__((vector_size(64)));  // __m512 without may_alias (NamedRegs)
using Accs = NamedRegs<F32x16>;                        // acc_k of token t at t * 8 + k

// The definition's final tree of token t's 8 accumulators, lane-wise, stored
// as 16 consecutive outputs (rows r0 .. r0 + 15 of one token).
template <int t>
[[gnu::always_inline]] inline void store_tree(Accs& acc, float* y) {
  auto a = [&]<int k>() -> __m512 { return acc.template at<t * 8 + k>(); };
  const __m512 s = _mm512_add_ps(
      _mm512_add_ps(_mm512_add_ps(a.template operator()<0>(), a.template operator()<4>()),
                    _mm512_add_ps(a.template operator()<2>(), a.template operator()<6>())),
      _mm512_add_ps(_mm512_add_ps(a.template operator()<1>(), a.template operator()<5>()),
                    _mm512_add_ps(a.template operator()<3>(), a.template operator()<7>())));
  _mm512_storeu_ps(y, s);
}

[[gnu::always_inline]] inline void panel_flipped(const uint8_t* const* rows, __m512i flip, __m512i* out) {
  __m512i x[8];
  panel_transpose(rows, x);
  for (int k = 0; k < 8; ++k) _mm512_store_si512(out + k, _mm512_xor_si512(x[k], flip));
}

// INT8_G32: the panel's groups as w + 128 (unsigned bytes, the xor), so
// vpdpbusd(start, w + 128, q) = isum_k + 128 sum_{j<4} q[4k + j]: each lane
// sum starts from -128 sum q over the lane's 4 columns, the token's, made
// once per token and group for all 16 rows.
void int8_panel_pack(const QMatrix& W, int64_t r0, int64_t groups, PanelBuffer& b) {
  b.lines.resize(size_t(groups * 8));
  const __m512i flip = _mm512_set1_epi8(int8_t(0x80));
  const uint8_t* base = static_cast<const uint8_t*>(W.data) + r0 * W.cols;
  const int64_t whole = W.cols / kQ8Group;
  const uint8_t* rows[kPanelRows];
  for (int64_t g = 0; g < whole; ++g) {
    for (int i = 0; i < kPanelRows; ++i) rows[i] = base + i * W.cols + g * kQ8Group;
    panel_flipped(rows, flip, b.w() + g * 8);
  }
  if (whole < groups) {  // a partial last group: zeros past the row's end, as load_group reads it
    alignas(32) uint8_t pad[kPanelRows][kQ8Group] = {};
    const int64_t left = W.cols - whole * kQ8Group;
    for (int i = 0; i < kPanelRows; ++i) {
      std::memcpy(pad[i], base + i * W.cols + whole * kQ8Group, size_t(left));
      rows[i] = pad[i];
    }
    panel_flipped(rows, flip, b.w() + whole * 8);
  }
  panel_scales(W, r0, groups, b.s);
}

// The next panel's weights, fetched into L2 while this one computes: the
// transpose reads 16 rows at once, which the hardware prefetchers follow
// badly, and it has no arithmetic of its own to hide the misses behind
// (INT8 at n = 32, 2 threads: 5% faster with it). The first token
// tile of a panel calls step() once per group: the lines of one group of 16
// rows, so the fetch keeps pace with the sweep.
struct NextPanel {
  const uint8_t* base = nullptr;  // row 0 of the next panel; null: none
  int64_t row_bytes = 0, next = 0;
  [[gnu::always_inline]] inline void step(int count) {
    const int64_t lines = (row_bytes + 63) / 64;  // 64-byte lines per row
    for (int c = 0; c < count && next < lines * kPanelRows; ++c, ++next)
      _mm_prefetch(reinterpret_cast<const char*>(base + (next % kPanelRows) * row_bytes + (next / kPanelRows) * 64),
                   _MM_HINT_T1);
  }
};

// T tokens (t0 ..) of one INT8 panel: y[(t0 + t) * ldy + yr0 .. + 15].
// start: the lane sums' starting values of tokens t0 .. (lane_starts).
template <int T>
void int8_panel_tokens(const PanelBuffer& b, const Q8Rows& xq, const int32_t* start, int64_t t0, float* y,
                       int64_t ldy, int64_t yr0, NextPanel* pf) {
  Accs acc;
  const int64_t groups = xq.groups;
  for (int64_t g = 0; g < groups; ++g) {
    if (pf) pf->step(8);  // 16 rows x 32 bytes
    NamedRegs<F32x16> m;  // s_g of 16 rows, token t at t
    const __m512 ws = _mm512_loadu_ps(b.s.data() + g * kPanelRows);
    unrolled<T>([&]<int t>() __attribute__((always_inline)) {
      m.template at<t>() = _mm512_mul_ps(ws, _mm512_set1_ps(xq.row_d(t0 + t)[g]));
    });
    const __m512i* w = b.w() + g * 8;
    unrolled<8>([&]<int k>() __attribute__((always_inline)) {
      const __m512i wk = _mm512_load_si512(w + k);
      unrolled<T>([&]<int t>() __attribute__((always_inline)) {
        int32_t xk;
        std::memcpy(&xk, xq.row_q(t0 + t) + g * kQ8Group + 4 * k, 4);
        const __m512i s0 = _mm512_set1_epi32(start[(t * groups + g) * 8 + k]);
        const __m512i isum = _mm512_dpbusd_epi32(s0, wk, _mm512_set1_epi32(xk));
        F32x16& a = acc.template at<t * 8 + k>();
        a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), m.template at<t>(), a);
      });
    });
  }
  unrolled<T>([&]<int t>() __attribute__((always_inline)) { store_tree<t>(acc, y + (t0 + t) * ldy + yr0); });
}

// Where each INT8 lane sum of tokens [t0, t0 + nt) starts: -128 sum_{j<4}
// q[32g + 4k + j] at [(t - t0) * groups + g] * 8 + k (see int8_panel_pack).
void int8_lane_starts(const Q8Rows& xq, int64_t t0, int64_t nt, std::vector<int32_t>& out) {
  out.resize(size_t(nt * xq.groups * 8));
  const __m256i ones128 = _mm256_set1_epi8(int8_t(0x80));
  for (int64_t t = 0; t < nt; ++t)
    for (int64_t g = 0; g < xq.groups; ++g) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq.row_q(t0 + t) + g * kQ8Group));
      const __m256i pc = _mm256_dpbusd_epi32(_mm256_setzero_si256(), ones128, q);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.data() + (t * xq.groups + g) * 8),
                          _mm256_sub_epi32(_mm256_setzero_si256(), pc));
    }
}

// INT4's: -c (8 sum q over lane k's 8 columns, Q8Pair::c), at
// [(t - t0) * pairs + p] * 8 + k.
void int4_lane_starts(const Q8Rows& xq, int64_t t0, int64_t nt, std::vector<int32_t>& out) {
  out.resize(size_t(nt * xq.pairs * 8));
  for (int64_t t = 0; t < nt; ++t)
    for (int64_t p = 0; p < xq.pairs; ++p) {
      const __m256i c = _mm256_load_si256(reinterpret_cast<const __m256i*>(xq.row_pairs(t0 + t)[p].c));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.data() + (t * xq.pairs + p) * 8),
                          _mm256_sub_epi32(_mm256_setzero_si256(), c));
    }
}

// INT4_G32: pair p's 32 bytes of 16 rows, transposed (dword k of each row:
// lane k's 4 bytes), then split into the stored nibbles (w + 8, unsigned):
// lo (the even columns) and hi (the odd ones), as int4_pair splits them. A
// lone last pair has 16 bytes (lanes 0..3); zeros stand for the rest.
void int4_panel_pack(const QMatrix& W, int64_t r0, int64_t groups, int64_t pairs, PanelBuffer& b) {
  b.lines.resize(size_t(pairs * 16));
  const int64_t row_bytes = W.cols / 2;
  const uint8_t* base = static_cast<const uint8_t*>(W.data) + r0 * row_bytes;
  const __m512i nib = _mm512_set1_epi8(0x0F);
  const uint8_t* rows[kPanelRows];
  alignas(32) uint8_t pad[kPanelRows][32] = {};
  for (int64_t p = 0; p < pairs; ++p) {
    const bool lone = 2 * p + 1 >= groups;
    for (int i = 0; i < kPanelRows; ++i) {
      rows[i] = base + i * row_bytes + 32 * p;
      if (lone) {
        std::memcpy(pad[i], rows[i], 16);
        rows[i] = pad[i];
      }
    }
    __m512i* out = b.w() + p * 16;
    __m512i x[8];
    panel_transpose(rows, x);
    for (int k = 0; k < 8; ++k) {
      _mm512_store_si512(out + k, _mm512_and_si512(x[k], nib));
      _mm512_store_si512(out + 8 + k, _mm512_and_si512(_mm512_srli_epi16(x[k], 4), nib));
    }
  }
  panel_scales(W, r0, groups, b.s);
}

// T tokens of one INT4 panel. Lane k of pair p belongs to group 2p + k/4:
// lanes 0..3 take s_2p, 4..7 s_2p+1 (not touched for a lone last group).
template <int T>
void int4_panel_tokens(const PanelBuffer& b, const Q8Rows& xq, const int32_t* start, int64_t t0, float* y,
                       int64_t ldy, int64_t yr0, NextPanel* pf) {
  Accs acc;
  const int64_t pairs = xq.pairs;
  auto lanes = [&]<int k0>(int64_t p, int64_t g) __attribute__((always_inline)) {
    const __m512 ws = _mm512_loadu_ps(b.s.data() + g * kPanelRows);
    NamedRegs<F32x16> m;
    unrolled<T>([&]<int t>() __attribute__((always_inline)) {
      m.template at<t>() = _mm512_mul_ps(ws, _mm512_set1_ps(xq.row_pairs(t0 + t)[p].d[k0]));
    });
    const __m512i* w = b.w() + p * 16;
    unrolled<4>([&]<int j>() __attribute__((always_inline)) {
      constexpr int k = k0 + j;
      const __m512i lo = _mm512_load_si512(w + k), hi = _mm512_load_si512(w + 8 + k);
      unrolled<T>([&]<int t>() __attribute__((always_inline)) {
        const Q8Pair& x = xq.row_pairs(t0 + t)[p];
        int32_t e, o;
        std::memcpy(&e, x.e + 4 * k, 4);
        std::memcpy(&o, x.o + 4 * k, 4);
        const __m512i s0 = _mm512_set1_epi32(start[(t * pairs + p) * 8 + k]);
        const __m512i isum =
            _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(s0, lo, _mm512_set1_epi32(e)), hi, _mm512_set1_epi32(o));
        F32x16& a = acc.template at<t * 8 + k>();
        a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), m.template at<t>(), a);
      });
    });
  };
  for (int64_t p = 0; p < pairs; ++p) {
    if (pf) pf->step(8);  // 16 rows x 32 bytes
    lanes.template operator()<0>(p, 2 * p);
    if (2 * p + 1 < xq.groups) lanes.template operator()<4>(p, 2 * p + 1);
  }
  unrolled<T>([&]<int t>() __attribute__((always_inline)) { store_tree<t>(acc, y + (t0 + t) * ldy + yr0); });
}

// Tokens [t0, t0 + nt) of one panel in tiles of 3 (24 accumulators, the
// most GCC 12 keeps in registers beside the weights and scale products; 3
// ran 7-10% faster than 2 at n = 32 on one thread), then one of 2 or 1.
template <class Tokens>
void panel_tokens(int64_t t0, int64_t nt, Tokens&& tokens) {
  int64_t t = 0;
  for (; t + 3 <= nt; t += 3) tokens.template operator()<3>(t0 + t, t);
  if (t + 2 <= nt) tokens.template operator()<2>(t0 + t, t), t += 2;
  if (t < nt) tokens.template operator()<1>(t0 + t, t);
}

// Tokens are taken in blocks of this many, every panel of the range per
// block: a block's activations (and their lane starts) stay in L2 while the
// panels pass, and each panel is transposed once per block.
constexpr int64_t kTokenBlock = 64;

}  // namespace

// Rows [r0, r0 + 16 * panels) of W times every token of xq, in panels of 16
// adjacent rows (INT8_G32 or INT4_G32; n >= 1).
void matmul_q8_panels_avx512(const QMatrix& W, const Q8Rows& xq, float* y, int64_t ldy, int64_t r0,
                             int64_t panels) {
  PanelBuffer& b = panel_buffer();
  thread_local std::vector<int32_t> starts;
  const bool int8 = W.format == MatFormat::INT8_G32;
  for (int64_t t0 = 0; t0 < xq.n; t0 += kTokenBlock) {
    const int64_t nt = std::min(kTokenBlock, xq.n - t0);
    if (int8) int8_lane_starts(xq, t0, nt, starts);
    else int4_lane_starts(xq, t0, nt, starts);
    for (int64_t pn = 0; pn < panels; ++pn) {
      const int64_t pr = r0 + pn * kPanelRows;
      const int64_t row_bytes = int8 ? W.cols : W.cols / 2;
      NextPanel next;
      if (pn + 1 < panels) {
        next.base = static_cast<const uint8_t*>(W.data) + (pr + kPanelRows) * row_bytes;
        next.row_bytes = row_bytes;
      }
      if (int8) {
        int8_panel_pack(W, pr, xq.groups, b);
        panel_tokens(t0, nt, [&]<int T>(int64_t t, int64_t i) {
          int8_panel_tokens<T>(b, xq, starts.data() + i * xq.groups * 8, t, y, ldy, pr, i == 0 ? &next : nullptr);
        });
      } else {
        int4_panel_pack(W, pr, xq.groups, xq.pairs, b);
        panel_tokens(t0, nt, [&]<int T>(int64_t t, int64_t i) {
          int4_panel_tokens<T>(b, xq, starts.data() + i * xq.pairs * 8, t, y, ldy, pr, i == 0 ? &next : nullptr);
        });
      }
    }
  }
}

}  // namespace trillion::avx2
