// linear_pair (two matrices, one input, quantized once) against two linear()
// calls: the same bits on both paths, pooled and serial, for every pair of
// integer formats (mixed INT8/INT4 included: the shared quantization then
// carries INT4's pair layout beside INT8's plain groups).
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <random>
#include <vector>

#include "common/thread_pool.hpp"
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
  for (MatFormat fa : {MatFormat::INT8_G32, MatFormat::INT4_G32})
    for (MatFormat fb : {MatFormat::INT8_G32, MatFormat::INT4_G32})
      for (Activations act : {Activations::f32, Activations::int8}) {
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
