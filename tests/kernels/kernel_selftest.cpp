// Boost-free kernel test (for cross-built targets run under qemu, where no
// Boost exists): every available path against float64 within the rounding
// bound, the determinism contract (bits independent of n, of the other rows
// of x and of the row/column split) and the integer-dot path's checks
// (q8_checks.hpp). Prints "N passed, N failed".
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/kernel_table.hpp"
#include "kernels/matmul.hpp"
#include "kernels/matmul_bf16.hpp"
#include "isa_report.hpp"
#include "kernel_checks.hpp"
#include "bf16_checks.hpp"
#include "exp_checks.hpp"
#include "q8_checks.hpp"
#include "random_matrix.hpp"

using namespace trillion;
using namespace trillion::test;

namespace {

int passed = 0, failed = 0;

void check(bool ok, const char* what, const char* isa, MatFormat f, int64_t rows, int64_t cols, int64_t n = 0) {
  if (ok) {
    ++passed;
    return;
  }
  ++failed;
  std::printf("FAIL %s [%s %s %lldx%lld n=%lld]\n", what, isa, format_name(f), (long long)rows, (long long)cols,
              (long long)n);
}

void test_case(KernelIsa isa, const MatmulShape& c) {
  const char* name = to_string(isa);
  const KernelTable& k = kernel_table(isa);
  RandomMatrix W(c.format, c.rows, c.cols, 5);
  const QMatrix Wv = W.view();
  const int64_t pool_rows = 70;
  auto x = random_floats(pool_rows * c.cols, 6, -2.0f, 2.0f);
  // Accuracy, 17 tokens.
  {
    const int64_t n = 17;
    std::vector<float> xs(x.begin(), x.begin() + n * c.cols), y(size_t(n * c.rows));
    std::vector<double> y64, s;
    matmul_f64(W, xs, n, y64, s);
    k.matmul_rows(Wv, xs.data(), n, y.data(), c.rows, 0, c.rows);
    check(bound_misses(y, y64, s, c.cols).empty(), "matmul accuracy", name, c.format, c.rows, c.cols, n);
  }
  // Bits independent of n and of the offset among other tokens.
  std::vector<float> alone(size_t(pool_rows * c.rows));
  for (int64_t t = 0; t < pool_rows; ++t)
    k.matmul_rows(Wv, &x[size_t(t * c.cols)], 1, &alone[size_t(t * c.rows)], c.rows, 0, c.rows);
  for (int64_t n : {1, 2, 3, 4, 5, 8, 9, 17, 64})
    for (int64_t offset : {int64_t(0), int64_t(5)}) {
      std::vector<float> y(size_t(n * c.rows));
      k.matmul_rows(Wv, &x[size_t(offset * c.cols)], n, y.data(), c.rows, 0, c.rows);
      check(same_bits(y.data(), &alone[size_t(offset * c.rows)], y.size()), "matmul bits vs n=1", name, c.format,
            c.rows, c.cols, n);
    }
  // Any split of the rows gives the same bits.
  std::vector<float> split(size_t(17 * c.rows));
  for (int64_t r0 = 0; r0 < c.rows;) {
    const int64_t r1 = std::min(c.rows, r0 + 1 + (r0 * 7) % 5);
    k.matmul_rows(Wv, x.data(), 17, split.data(), c.rows, r0, r1);
    r0 = r1;
  }
  check(same_bits(split.data(), alone.data(), split.size()), "matmul row split", name, c.format, c.rows, c.cols, 17);
  // Transposed product: accuracy and bits independent of n and column split.
  {
    auto xt = random_floats(9 * c.rows, 7, -2.0f, 2.0f);
    std::vector<double> y64, s;
    matmul_t_f64(W, xt, 9, y64, s);
    std::vector<float> y(size_t(9 * c.cols)), one(size_t(c.cols));
    k.matmul_t_cols(Wv, xt.data(), 9, y.data(), 0, c.cols);
    check(bound_misses(y, y64, s, c.rows).empty(), "matmul_t accuracy", name, c.format, c.rows, c.cols, 9);
    bool same = true;
    for (int64_t t = 0; t < 9; ++t) {
      k.matmul_t_cols(Wv, &xt[size_t(t * c.rows)], 1, one.data(), 0, c.cols);
      same = same && same_bits(one.data(), &y[size_t(t * c.cols)], one.size());
    }
    check(same, "matmul_t bits vs n=1", name, c.format, c.rows, c.cols, 9);
    std::vector<float> ys(y.size());
    for (int64_t c0 = 0; c0 < c.cols; c0 += 32) k.matmul_t_cols(Wv, xt.data(), 9, ys.data(), c0, std::min(c.cols, c0 + 32));
    check(same_bits(ys.data(), y.data(), y.size()), "matmul_t column split", name, c.format, c.rows, c.cols, 9);
  }
  // The path agrees with the scalar reference within the bound (already by float64); dot and axpy.
  {
    auto a = random_floats(1001, 8), b = random_floats(1001, 9);
    double d64 = 0, s = 0;
    for (size_t i = 0; i < a.size(); ++i) d64 += double(a[i]) * b[i], s += std::fabs(double(a[i]) * b[i]);
    const float d = k.dot(a.data(), b.data(), int64_t(a.size()));
    check(std::fabs(d - d64) <= 1005 * std::ldexp(1.0, -24) * s, "dot accuracy", name, c.format, 1, 1001);
    std::vector<float> yv(b);
    k.axpy(0.5f, a.data(), yv.data(), int64_t(a.size()));
    bool ok = true;
    for (size_t i = 0; i < a.size(); ++i) ok = ok && std::fabs(yv[i] - (b[i] + 0.5 * a[i])) <= 1e-6;
    check(ok, "axpy", name, c.format, 1, 1001);
    std::vector<float> yp(b);  // an element's bits do not depend on the length
    k.axpy(0.5f, a.data(), yp.data(), 997);
    check(same_bits(yp.data(), yv.data(), 997), "axpy bits vs n", name, c.format, 1, 1001);
  }
}

}  // namespace

// dot_tile / axpy_tile have exactly the bits of loops over the table's dot / axpy.
void test_tiles(KernelIsa isa) {
  const KernelTable& k = kernel_table(isa);
  for (int64_t n : {15, 40, 517})
    for (int64_t na : {1, 5, 16})
      for (int64_t nb : {1, 7, 64}) {
        const int64_t ld = n + 3;
        auto a = random_floats(na * ld, 51), b = random_floats(nb * ld, 52), p = random_floats(na * nb, 53);
        std::vector<float> got(size_t(na * nb)), want(got.size());
        k.dot_tile(a.data(), ld, na, b.data(), ld, nb, n, got.data(), nb, b.data());
        for (int64_t i = 0; i < na; ++i)
          for (int64_t j = 0; j < nb; ++j) want[size_t(i * nb + j)] = k.dot(&a[size_t(i * ld)], &b[size_t(j * ld)], n);
        check(same_bits(got.data(), want.data(), got.size()), "dot_tile bits", to_string(isa), MatFormat::F32, na, nb, n);
        std::vector<float> y = a, y_want = a;
        k.axpy_tile(p.data(), nb, na, b.data(), ld, nb, y.data(), ld, n);
        for (int64_t i = 0; i < na; ++i)
          for (int64_t j = 0; j < nb; ++j) k.axpy(p[size_t(i * nb + j)], &b[size_t(j * ld)], &y_want[size_t(i * ld)], n);
        check(same_bits(y.data(), y_want.data(), y.size()), "axpy_tile bits", to_string(isa), MatFormat::F32, na, nb, n);
      }
}

int main() {
  std::printf("kernel path of this process: %s\n", to_string(kernel_isa()));
  report_skipped_isas();
  for (KernelIsa isa : available_isas())
    for (const MatmulShape& c : kMatmulShapes) test_case(isa, c);
  for (KernelIsa isa : available_isas()) test_tiles(isa);
  // exp: accuracy, every path's bits (every 65521st float: quick under qemu).
  auto exp_check = [](const std::string& misses, const char* what) {
    if (misses.empty()) return void(++passed);
    ++failed;
    std::printf("FAIL %s: %s\n", what, misses.c_str());
  };
  exp_check(exp_accuracy_misses(65521), "exp_f32 accuracy");
  for (KernelIsa isa : available_isas()) exp_check(exp_path_misses(isa, 65521), "exp path bits");
  int q8_checks = 0;
  const std::vector<std::string> q8 = q8_failures(&q8_checks);  // the integer-dot path
  for (const std::string& f : q8) std::printf("FAIL %s\n", f.c_str());
  failed += int(q8.size());
  passed += q8_checks - int(q8.size());
  // The bf16 path: Arm's step by hand, BFMMLA against it (where the CPU has
  // it), the native kernel against the build's definition.
  auto list_check = [](const std::vector<std::string>& fails, const char* what) {
    for (const std::string& f : fails) std::printf("FAIL %s\n", f.c_str());
    if (fails.empty()) ++passed;
    else ++failed;
    std::printf("%s: %s\n", what, fails.empty() ? "ok" : "FAILED");
  };
  list_check(arm_step_by_hand(), "bf16 Arm step by hand");
  bool ran = false;
  const std::vector<std::string> mmla = bfmmla_against_step(ran);
  if (ran) list_check(mmla, "BFMMLA against the Arm step");
  else std::printf("SKIPPED BFMMLA against the Arm step: no FEAT_BF16 here (bf16 runs the scalar definition)\n");
  std::printf("bf16 path: %s definition, %s\n", to_string(kBf16Family), bf16_native() ? "native" : "scalar");
  list_check(bf16_kernel_against_definition(12), "bf16 kernel against the definition");
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
