#include "q8_checks.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <utility>

#include "common/thread_pool.hpp"
#include "kernel_checks.hpp"
#include "kernels/kernel_table.hpp"
#include "kernels/matmul_q8.hpp"
#include "random_matrix.hpp"

namespace trillion::test {
namespace {

struct Checker {
  std::vector<std::string> failures;
  int checks = 0;
  void operator()(bool ok, const std::string& what) {
    ++checks;
    if (!ok) failures.push_back(what);
  }
};

std::string where(KernelIsa isa, MatFormat f, int64_t rows, int64_t cols, int64_t n) {
  char buf[128];
  std::snprintf(buf, sizeof buf, " [%s %s %lldx%lld n=%lld]", to_string(isa), format_name(f), (long long)rows,
                (long long)cols, (long long)n);
  return buf;
}

void quantize_with(const KernelTable& k, const float* x, int64_t n, int64_t cols, Q8Rows& out,
                   MatFormat w = MatFormat::INT8_G32) {
  out.n = n;
  out.cols = cols;
  out.groups = (cols + kQ8Group - 1) / kQ8Group;
  out.q.assign(size_t(n * out.groups * kQ8Group), 99);  // the kernel must write every byte
  out.d.assign(size_t(n * out.groups), -1.0f);
  for (int64_t t = 0; t < n; ++t)
    k.quantize_q8_row(x + t * cols, cols, out.q.data() + t * out.groups * kQ8Group, out.d.data() + t * out.groups);
  out.pairs = 0;
  if (w == MatFormat::INT4_G32) q8_pair_layout(out);
}

// The pair layout by its definition (matmul_q8.hpp), element by element.
void check_pair_layout(Checker& check) {
  const std::vector<float> x = random_floats(3 * 160, 31, -9.0f, 9.0f);  // 5 groups: 2 pairs and a lone group
  Q8Rows q;
  quantize_q8_ref(x.data(), 3, 160, q, MatFormat::INT4_G32);
  bool ok = q.pairs == 3 && q.pair.size() == 3 * 3;
  for (int64_t t = 0; ok && t < 3; ++t)
    for (int64_t p = 0; p < 3; ++p)
      for (int64_t h = 0; h < 2; ++h) {
        const int64_t g = 2 * p + h;
        for (int64_t i = 0; i < 16; ++i) {
          const int8_t e = g < 5 ? q.row_q(t)[g * 32 + 2 * i] : 0, o = g < 5 ? q.row_q(t)[g * 32 + 2 * i + 1] : 0;
          ok = ok && q.row_pairs(t)[p].e[16 * h + i] == e && q.row_pairs(t)[p].o[16 * h + i] == o;
        }
        for (int64_t j = 0; j < 4; ++j) {
          int32_t sum = 0;
          for (int64_t c = 0; c < 8 && g < 5; ++c) sum += q.row_q(t)[g * 32 + 8 * j + c];
          const float d = g < 5 ? q.row_d(t)[g] : 0.0f;
          ok = ok && q.row_pairs(t)[p].c[4 * h + j] == 8 * sum && q.row_pairs(t)[p].d[4 * h + j] == d;
        }
      }
  check(ok, "pair layout by its definition");
  Q8Rows plain;
  quantize_q8(x.data(), 3, 160, plain);
  check(plain.pairs == 0, "no pair layout for INT8 weights");
  RandomMatrix W(MatFormat::INT4_G32, 4, 160, 32);
  std::vector<float> y(3 * 4);
  bool threw = false;
  try {
    matmul_q8_serial(W.view(), plain, y.data(), 4);
  } catch (const std::exception& e) {
    threw = std::string(e.what()).find("pair layout") != std::string::npos;
  }
  check(threw, "INT4 product refuses activations without the pair layout");
}

bool same_q8(const Q8Rows& a, const Q8Rows& b) {
  return a.q == b.q && same_bits(a.d.data(), b.d.data(), a.d.size());
}

// Hand-computed: a group with absmax 127 has d = 1, so x/d = x and the ties
// k + 0.5 go to the even neighbour; an all-zero group has d = 0, q = 0; a
// group holding NaN or inf has d = NaN, q = 0; padding past cols is 0.
void check_hand_cases(Checker& check, KernelIsa isa) {
  const KernelTable& k = kernel_table(isa);
  std::vector<float> x(96, 0.0f);
  const float ties[] = {127.0f, 2.5f, 3.5f, -0.5f, -1.5f, 0.5f, -126.5f, 126.4f};
  const int expect[] = {127, 2, 4, 0, -2, 0, -126, 126};
  for (int i = 0; i < 8; ++i) x[size_t(i)] = ties[i];
  x[64] = 1.0f;
  x[65] = std::numeric_limits<float>::quiet_NaN();
  Q8Rows q;
  quantize_with(k, x.data(), 1, 70, q);  // groups: [0,32) ties, [32,64) zeros, [64,70) NaN + padding
  bool ok = q.groups == 3 && q.d[0] == 1.0f && q.d[1] == 0.0f && std::isnan(q.d[2]);
  for (int i = 0; i < 8; ++i) ok = ok && q.q[size_t(i)] == expect[i];
  for (size_t i = 8; i < q.q.size(); ++i) ok = ok && q.q[i] == 0;
  check(ok, std::string("quantize hand cases [") + to_string(isa) + "]");
}

// Independent of the kernels: d = float(absmax / 127) and q = rint(float(x / d)),
// computed in float64 (double rounding to float is exact for one division).
void check_against_f64(Checker& check, KernelIsa isa, const std::vector<float>& x, int64_t n, int64_t cols) {
  Q8Rows q;
  quantize_with(kernel_table(isa), x.data(), n, cols, q);
  bool ok = true;
  for (int64_t t = 0; t < n; ++t)
    for (int64_t g = 0; g < q.groups; ++g) {
      double amax = 0;
      for (int64_t c = g * 32; c < std::min(cols, g * 32 + 32); ++c) amax = std::max(amax, std::fabs(double(x[size_t(t * cols + c)])));
      const float d = float(amax / 127.0);
      ok = ok && q.row_d(t)[g] == d;
      for (int64_t j = 0; j < 32; ++j) {
        const int64_t c = g * 32 + j;
        const int want = c < cols && d > 0 ? int(std::nearbyint(float(double(x[size_t(t * cols + c)]) / double(d)))) : 0;
        ok = ok && q.row_q(t)[c] == want;
      }
    }
  check(ok, std::string("quantize vs float64 [") + to_string(isa) + " cols=" + std::to_string(cols) + "]");
}

// y64[t][r] = sum_g s_g * isum_g exactly (isum exact, s_g the float32 product
// the definition uses), with bound[t][r] = (G + 4) u sum_{g,k} |s_g * isum_gk|
// over the lane sums: the error of at most G fma per lane and the 3-level
// tree, u = 2^-24.
void exact_reference(const RandomMatrix& W, const Q8Rows& q, std::vector<double>& y64, std::vector<double>& bound) {
  y64.assign(size_t(q.n * W.rows), 0.0);
  bound.assign(size_t(q.n * W.rows), 0.0);
  const double u = std::ldexp(1.0, -24);
  for (int64_t t = 0; t < q.n; ++t)
    for (int64_t r = 0; r < W.rows; ++r) {
      double y = 0, mag = 0;
      for (int64_t g = 0; g < q.groups; ++g) {
        const float s = W.qscale(r, g) * q.row_d(t)[g];
        const int64_t width = W.format == MatFormat::INT4_G32 ? 8 : 4;  // the definition's lanes
        for (int64_t k = 0; k < 32 / width; ++k) {
          int64_t lane = 0;
          for (int64_t c = g * 32 + width * k; c < std::min(W.cols, g * 32 + width * k + width); ++c)
            lane += int64_t(W.qvalue(r, c)) * q.row_q(t)[c];
          y += double(s) * double(lane);
          mag += std::fabs(double(s) * double(lane));
        }
      }
      y64[size_t(t * W.rows + r)] = y;
      bound[size_t(t * W.rows + r)] = double(q.groups + 4) * u * mag + 1e-30;
    }
}

void check_products(Checker& check, KernelIsa isa, const MatmulShape& c) {
  const KernelTable& k = kernel_table(isa);
  RandomMatrix W(c.format, c.rows, c.cols, 11);
  const QMatrix Wv = W.view();
  const int64_t pool_rows = 21;
  const std::vector<float> x = random_floats(pool_rows * c.cols, 12, -3.0f, 3.0f);
  Q8Rows all;
  quantize_with(k, x.data(), pool_rows, c.cols, all, c.format);
  Q8Rows ref;
  quantize_q8_ref(x.data(), pool_rows, c.cols, ref, c.format);
  check(same_q8(all, ref), "quantize bits vs portable" + where(isa, c.format, c.rows, c.cols, pool_rows));

  std::vector<float> y(size_t(pool_rows * c.rows)), yref(y.size());
  k.matmul_q8_rows(Wv, all, y.data(), c.rows, 0, c.rows);
  matmul_q8_ref(Wv, ref, yref.data());
  check(same_bits(y.data(), yref.data(), y.size()), "product bits vs portable" + where(isa, c.format, c.rows, c.cols, pool_rows));

  std::vector<double> y64, bound;
  exact_reference(W, all, y64, bound);
  bool in_bound = true;
  for (size_t i = 0; i < y.size(); ++i) in_bound = in_bound && std::fabs(double(y[i]) - y64[i]) <= bound[i];
  check(in_bound, "product vs exact-integer float64" + where(isa, c.format, c.rows, c.cols, pool_rows));

  // Against the float64 product of the unquantized activations: each
  // activation moves by at most d_g / 2, so |y - x.W| <= sum_c |W[r][c]| d_g / 2
  // (+ the rounding bound above).
  std::vector<double> yx, sx;
  matmul_f64(W, x, pool_rows, yx, sx);
  bool quant_ok = true;
  for (int64_t t = 0; t < pool_rows; ++t)
    for (int64_t r = 0; r < c.rows; ++r) {
      double b = 0;
      for (int64_t col = 0; col < c.cols; ++col) b += std::fabs(W.value(r, col)) * all.row_d(t)[col / 32] / 2;
      const size_t i = size_t(t * c.rows + r);
      quant_ok = quant_ok && std::fabs(double(y[i]) - yx[i]) <= b * (1 + 1e-6) + bound[i];
    }
  check(quant_ok, "product vs float64 of unquantized x" + where(isa, c.format, c.rows, c.cols, pool_rows));

  // Bits independent of n, of the offset among other tokens and of the row split.
  for (int64_t n : {1, 2, 3, 5, 8}) {
    for (int64_t offset : {int64_t(0), int64_t(3)}) {
      Q8Rows part;
      quantize_with(k, &x[size_t(offset * c.cols)], n, c.cols, part, c.format);
      std::vector<float> yp(size_t(n * c.rows));
      const int64_t mid = c.rows / 3;
      k.matmul_q8_rows(Wv, part, yp.data(), c.rows, 0, mid);
      k.matmul_q8_rows(Wv, part, yp.data(), c.rows, mid, c.rows);
      check(same_bits(yp.data(), &y[size_t(offset * c.rows)], yp.size()),
            "product bits vs batch of 21 (offset " + std::to_string(offset) + ", split)" +
                where(isa, c.format, c.rows, c.cols, n));
    }
  }
}

// Hand-computed extremes: weights of -128 and 127 against activations of
// +-127 (d = 1), the largest products an int8 lane can hold. A kernel that
// negates a weight of -128 (it wraps to -128) or saturates a 16-bit pair sum
// (2 * 128 * 127 = 32512 must fit) is wrong here. Scales are 1, so every
// output is an exact small integer sum: row r, column c holds -128 where
// (r + c) % 3 != 0, else 127; x[c] = +127 for even c, -127 for odd c.
void check_int8_extremes(Checker& check, KernelIsa isa) {
  // 9 rows x 3 tokens: the 4-row tiles; 21 x 6: a 16-row AVX-512 panel too.
  for (auto [rows, n] : {std::pair<int64_t, int64_t>{9, 3}, {21, 6}}) {
    const int64_t cols = 96;
    RandomMatrix W(MatFormat::INT8_G32, rows, cols, 5);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) W.data[size_t(r * cols + c)] = uint8_t(int8_t((r + c) % 3 ? -128 : 127));
    const uint16_t one = 0x3F80;  // bf16 1.0
    for (size_t i = 0; i + 1 < W.scale.size(); i += 2) std::memcpy(&W.scale[i], &one, 2);
    std::vector<float> x(size_t(n * cols));
    for (int64_t t = 0; t < n; ++t)
      for (int64_t c = 0; c < cols; ++c) x[size_t(t * cols + c)] = float((c + t) % 2 ? -127 : 127);
    Q8Rows q;
    quantize_with(kernel_table(isa), x.data(), n, cols, q);
    std::vector<float> y(size_t(n * rows));
    kernel_table(isa).matmul_q8_rows(W.view(), q, y.data(), rows, 0, rows);
    bool ok = true;
    for (int64_t t = 0; t < n; ++t)
      for (int64_t r = 0; r < rows; ++r) {
        int64_t want = 0;
        for (int64_t c = 0; c < cols; ++c) want += int64_t((r + c) % 3 ? -128 : 127) * ((c + t) % 2 ? -127 : 127);
        ok = ok && y[size_t(t * rows + r)] == float(want);
      }
    check(ok, std::string("int8 weights -128 / 127 against activations +-127 [") + to_string(isa) + " " +
                  std::to_string(rows) + " rows, n=" + std::to_string(n) + "]");
  }
}

// Gathered quantized rows (several rows, repeats, any order) are the
// quantization of the gathered float rows, pair layout included.
void check_gather(Checker& check) {
  for (MatFormat f : {MatFormat::INT8_G32, MatFormat::INT4_G32})
    for (int64_t cols : {32, 100, 2048}) {
      const std::vector<float> x = random_floats(6 * cols, 24, -4.0f, 4.0f);
      const std::vector<int64_t> rows = {4, 0, 4, 5, 2};
      std::vector<float> picked;
      for (int64_t r : rows) picked.insert(picked.end(), x.begin() + r * cols, x.begin() + (r + 1) * cols);
      Q8Rows all, gathered, want;
      quantize_q8(x.data(), 6, cols, all, f);
      q8_gather(all, rows.data(), int64_t(rows.size()), gathered);
      quantize_q8(picked.data(), int64_t(rows.size()), cols, want, f);
      bool same = same_q8(gathered, want) && gathered.n == want.n && gathered.pairs == want.pairs &&
                  gathered.pair.size() == want.pair.size() &&
                  (want.pair.empty() ||  // INT8: no pair layout (and memcmp must not see a null pointer)
                   std::memcmp(gathered.pair.data(), want.pair.data(), want.pair.size() * sizeof(Q8Pair)) == 0);
      check(same, std::string("q8_gather vs quantizing the gathered rows [") + format_name(f) + " cols=" +
                      std::to_string(cols) + "]");
    }
}

// The pool drivers: any thread count gives the bits of one call, and a pair
// of matrices in one call the bits of each alone. 2048 columns, so the pool
// splits the rows (a chunk is worth at least 2^17 multiply-adds), and the
// pair's chunks straddle the two matrices.
void check_threads(Checker& check) {
  for (MatFormat f : {MatFormat::INT8_G32, MatFormat::INT4_G32}) {
    for (int64_t cols : {96, 2048}) {
      RandomMatrix A(f, 61, cols, 21), B(f, 37, cols, 23);
      const std::vector<float> x = random_floats(5 * cols, 22);
      Q8Rows q;
      quantize_q8(x.data(), 5, cols, q, f);
      std::vector<float> sa(size_t(5 * 61)), sb(size_t(5 * 37)), ya(sa.size()), yb(sb.size());
      active_kernel_table().matmul_q8_rows(A.view(), q, sa.data(), 61, 0, 61);
      active_kernel_table().matmul_q8_rows(B.view(), q, sb.data(), 37, 0, 37);
      for (int threads : {1, 2, 3}) {
        const std::string where = std::string(format_name(f)) + " cols=" + std::to_string(cols) +
                                  " threads=" + std::to_string(threads) + "]";
        ThreadPool pool(threads);
        matmul_q8(A.view(), q, ya.data(), pool);
        check(same_bits(ya.data(), sa.data(), ya.size()), "matmul_q8 bits vs serial [" + where);
        std::fill(ya.begin(), ya.end(), -1.0f);
        matmul_q8_pair(A.view(), ya.data(), B.view(), yb.data(), q, pool);
        check(same_bits(ya.data(), sa.data(), ya.size()) && same_bits(yb.data(), sb.data(), yb.size()),
              "matmul_q8_pair bits vs serial [" + where);
      }
    }
  }
}

// The large-batch tiles' edges (x86/matmul_q8_gemm_avx2.cpp, the AVX-512
// panels and the NEON tiles): every n from 1 to 70 (token pairs, a lone last token), odd row
// counts (4-row tiles and their remainder), group counts around the 8-group
// blocks of scale products with a partial last group (INT8) and a lone last
// group (INT4). Each output bit for bit the portable definition's, and the
// token's alone (n = 1: the decode tiles).
void check_tile_edges(Checker& check, KernelIsa isa) {
  const KernelTable& k = kernel_table(isa);
  const std::vector<MatmulShape> shapes = {{MatFormat::INT8_G32, 13, 7 * 32 + 5}, {MatFormat::INT8_G32, 7, 9 * 32},
                                           {MatFormat::INT8_G32, 37, 17 * 32 - 1}, {MatFormat::INT4_G32, 13, 9 * 32},
                                           {MatFormat::INT4_G32, 5, 16 * 32},      {MatFormat::INT4_G32, 21, 17 * 32},
                                           // AVX-512's 16-row panels (x86/matmul_q8_panels_avx512.cpp): three
                                           // panels (a partial last group), two and a remainder of 3 rows (a lone
                                           // last INT4 group), tokens past one 64-token block.
                                           {MatFormat::INT8_G32, 48, 9 * 32 + 7},  {MatFormat::INT4_G32, 35, 15 * 32}};
  const int64_t most = 70;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const MatmulShape& c = shapes[i];
    RandomMatrix W(c.format, c.rows, c.cols, 40 + i);
    const std::vector<float> x = random_floats(most * c.cols, 41 + i, -4.0f, 4.0f);
    Q8Rows all;
    quantize_q8_ref(x.data(), most, c.cols, all, c.format);
    std::vector<float> want(size_t(most * c.rows)), alone(want.size());
    matmul_q8_ref(W.view(), all, want.data());
    for (int64_t t = 0; t < most; ++t) {
      Q8Rows one;
      quantize_with(k, &x[size_t(t * c.cols)], 1, c.cols, one, c.format);
      k.matmul_q8_rows(W.view(), one, &alone[size_t(t * c.rows)], c.rows, 0, c.rows);
    }
    check(same_bits(alone.data(), want.data(), want.size()),
          "one token at a time vs portable" + where(isa, c.format, c.rows, c.cols, 1));
    // Every n for the first shape of each format and the panels', a spread of n for the others.
    const bool every = i == 0 || i == 3 || i >= 6;
    for (int64_t n = 1; n <= most; n += every || n < 10 ? 1 : 7) {
      Q8Rows part;
      quantize_with(k, x.data(), n, c.cols, part, c.format);
      std::vector<float> y(size_t(n * c.rows), -1.0f);
      k.matmul_q8_rows(W.view(), part, y.data(), c.rows, 0, c.rows);
      check(same_bits(y.data(), want.data(), y.size()), "tile edges vs portable" + where(isa, c.format, c.rows, c.cols, n));
    }
  }
}

// The pool drivers at large n, every thread count up to 8: each thread's rows
// are tiles of their own, and any split gives the bits of one serial call.
void check_threads_large(Checker& check) {
  for (MatFormat f : {MatFormat::INT8_G32, MatFormat::INT4_G32}) {
    RandomMatrix A(f, 67, 512, 25), B(f, 29, 512, 26);
    for (int64_t n : {2, 9, 70}) {
      const std::vector<float> x = random_floats(n * 512, 27);
      Q8Rows q;
      quantize_q8(x.data(), n, 512, q, f);
      std::vector<float> sa(size_t(n * 67)), sb(size_t(n * 29)), ya(sa.size()), yb(sb.size());
      matmul_q8_serial(A.view(), q, sa.data(), 67);
      matmul_q8_serial(B.view(), q, sb.data(), 29);
      for (int threads = 1; threads <= 8; ++threads) {
        const std::string where = std::string(format_name(f)) + " n=" + std::to_string(n) +
                                  " threads=" + std::to_string(threads) + "]";
        ThreadPool pool(threads);
        std::fill(ya.begin(), ya.end(), -1.0f);
        matmul_q8(A.view(), q, ya.data(), pool);
        check(same_bits(ya.data(), sa.data(), ya.size()), "matmul_q8 bits vs serial, large n [" + where);
        std::fill(ya.begin(), ya.end(), -1.0f);
        matmul_q8_pair(A.view(), ya.data(), B.view(), yb.data(), q, pool);
        check(same_bits(ya.data(), sa.data(), ya.size()) && same_bits(yb.data(), sb.data(), yb.size()),
              "matmul_q8_pair bits vs serial, large n [" + where);
      }
    }
  }
}

}  // namespace

std::vector<std::string> q8_failures(int* checks) {
  Checker check;
  const std::vector<MatmulShape> shapes = {
      {MatFormat::INT8_G32, 7, 96}, {MatFormat::INT8_G32, 33, 203}, {MatFormat::INT8_G32, 5, 1000},
      {MatFormat::INT8_G32, 1, 7},  {MatFormat::INT4_G32, 7, 96},   {MatFormat::INT4_G32, 40, 256},
      {MatFormat::INT4_G32, 1, 32}, {MatFormat::INT4_G32, 9, 2048}, {MatFormat::INT4_G32, 6, 160},
      // INT4 one-token zmm tile edges: 3 whole pairs (one left after the
      // double pairs), 3 pairs and a lone group, 5 double pairs and the 4-row tiles' remainder.
      {MatFormat::INT4_G32, 5, 192},  {MatFormat::INT4_G32, 11, 224}, {MatFormat::INT4_G32, 13, 640},
      // INT8 one-token zmm tile edges: one whole pair, pairs and an odd last
      // group, pairs and a partial group, the 4-row tiles' remainder.
      {MatFormat::INT8_G32, 4, 64},   {MatFormat::INT8_G32, 9, 160},  {MatFormat::INT8_G32, 13, 650},
      // neon-i8mm's SMMLA rows (calls of 16 rows or more): row pairs and a
      // lone last row, an odd group count; and row pairs only, many groups.
      {MatFormat::INT4_G32, 35, 160}, {MatFormat::INT4_G32, 18, 2048}};
  for (KernelIsa isa : available_isas()) {
    check_hand_cases(check, isa);
    check_int8_extremes(check, isa);
    for (int64_t cols : {1, 31, 32, 33, 100, 257}) {
      const std::vector<float> x = random_floats(3 * cols, uint64_t(cols), -50.0f, 50.0f);
      check_against_f64(check, isa, x, 3, cols);
    }
    for (const MatmulShape& s : shapes) check_products(check, isa, s);
    check_tile_edges(check, isa);
  }
  check_threads(check);
  check_threads_large(check);
  check_gather(check);
  check_pair_layout(check);
  *checks += check.checks;
  return check.failures;
}

}  // namespace trillion::test
