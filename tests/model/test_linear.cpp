// linear_pair (two matrices, one input, quantized once) against two linear()
// calls: the same bits on every path, pooled and serial, for every pair of
// integer and FP8 formats (mixed INT8/INT4 included: the shared quantization
// then carries INT4's pair layout beside INT8's plain groups); and which
// weights the bf16 path takes.
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <random>
#include <vector>

#include "common/thread_pool.hpp"
#include "kernels/matmul.hpp"
#include "kernels/matmul_bf16.hpp"
#include "model/linear.hpp"
#include "random_matrix.hpp"

using namespace trillion;
using trillion::test::RandomMatrix;

BOOST_AUTO_TEST_CASE(linear_pair_matches_two_linear_calls) {
  const int64_t cols = 256, n = 5;
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(size_t(n * cols));
  for (float& v : x) v = g(rng);
  ThreadPool pool(2);
  for (MatFormat fa : {MatFormat::INT8_G32, MatFormat::INT4_G32, MatFormat::FP8_B128})
    for (MatFormat fb : {MatFormat::INT8_G32, MatFormat::INT4_G32, MatFormat::FP8_B128})
      for (Activations act : {Activations::f32, Activations::int8, Activations::bf16}) {
        const RandomMatrix A(fa, 40, cols, 1), B(fb, 24, cols, 2);
        const QMatrix a = A.view(), b = B.view();
        std::vector<float> ya(size_t(n * 40)), yb(size_t(n * 24)), ra(ya.size()), rb(yb.size());
        linear(a, x.data(), n, ra.data(), act, pool);
        linear(b, x.data(), n, rb.data(), act, pool);
        for (ThreadPool* p : {&pool, static_cast<ThreadPool*>(nullptr)}) {
          std::fill(ya.begin(), ya.end(), -1.0f);
          std::fill(yb.begin(), yb.end(), -1.0f);
          linear_pair(a, ya.data(), b, yb.data(), x.data(), n, act, p);
          BOOST_TEST_CONTEXT("A " << int(fa) << " B " << int(fb) << " act " << to_string(act) << " pooled " << bool(p)) {
            BOOST_TEST(std::memcmp(ya.data(), ra.data(), ya.size() * 4) == 0);
            BOOST_TEST(std::memcmp(yb.data(), rb.data(), yb.size() * 4) == 0);
          }
        }
      }
}

// --activations bf16 runs FP8 weights on kernels/matmul_bf16's definition
// (pooled and serial, with an output stride) and every other format on f32.
BOOST_AUTO_TEST_CASE(bf16_path_takes_fp8_weights_only) {
  const int64_t cols = 200, rows = 36, n = 3, ldy = rows + 5;
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(size_t(n * cols));
  for (float& v : x) v = g(rng);
  ThreadPool pool(2);
  const RandomMatrix F(MatFormat::FP8_B128, rows, cols, 7);
  Bf16Rows xb;
  round_bf16_rows(x.data(), n, cols, xb);
  std::vector<float> want(size_t(n * rows)), y(want.size()), ys(size_t(n * ldy), -1.0f);
  matmul_bf16_ref(F.view(), xb, want.data());
  linear(F.view(), x.data(), n, y.data(), Activations::bf16, pool);
  BOOST_TEST(std::memcmp(y.data(), want.data(), y.size() * 4) == 0);
  linear_serial(F.view(), x.data(), n, ys.data(), ldy, Activations::bf16);
  for (int64_t t = 0; t < n; ++t)
    BOOST_TEST(std::memcmp(&ys[size_t(t * ldy)], &want[size_t(t * rows)], size_t(rows) * 4) == 0, "row " << t);
  // The f32 path differs from it (bf16 keeps 8 bits): the path was taken.
  matmul(F.view(), x.data(), n, y.data(), pool);
  BOOST_TEST(std::memcmp(y.data(), want.data(), y.size() * 4) != 0);
  for (MatFormat f : {MatFormat::BF16, MatFormat::INT8_G32, MatFormat::INT4_G32, MatFormat::F32}) {
    const RandomMatrix W(f, rows, 256, 9);
    std::vector<float> x2(size_t(n * 256), 0.25f), a(size_t(n * rows)), b(a.size());
    for (size_t i = 0; i < x2.size(); ++i) x2[i] = g(rng);
    linear(W.view(), x2.data(), n, a.data(), Activations::bf16, pool);
    matmul(W.view(), x2.data(), n, b.data(), pool);
    BOOST_TEST(std::memcmp(a.data(), b.data(), a.size() * 4) == 0, "format " << int(f));
  }
}
