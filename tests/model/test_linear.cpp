// linear_pair (two matrices, one input, quantized once) against two linear()
// calls: the same bits on both paths, pooled and serial, for every pair of
// integer formats (mixed INT8/INT4 included: the shared quantization then
// carries INT4's pair layout beside INT8's plain groups).
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <random>
#include <vector>

#include "common/numeric.hpp"
#include "common/thread_pool.hpp"
#include "model/linear.hpp"

using namespace trillion;

namespace {

struct Mat {
  std::vector<uint8_t> data;
  std::vector<uint16_t> scale;
  QMatrix m;
};

Mat make(MatFormat f, int64_t rows, int64_t cols, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Mat w;
  const int64_t n = rows * cols;
  w.data.resize(size_t(f == MatFormat::INT4_G32 ? n / 2 : n));
  for (auto& b : w.data) b = uint8_t(rng());  // INT8: every value, -128 included
  const int64_t sc = (cols + 31) / 32;
  w.scale.resize(size_t(rows * sc));
  std::uniform_real_distribution<float> u(0.001f, 0.02f);
  for (auto& s : w.scale) s = f32_to_bf16(u(rng));
  w.m.format = f;
  w.m.rows = rows;
  w.m.cols = cols;
  w.m.data = w.data.data();
  w.m.scale = w.scale.data();
  w.m.scale_cols = sc;
  return w;
}

}  // namespace

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
        const Mat A = make(fa, 40, cols, 1), B = make(fb, 24, cols, 2);
        std::vector<float> ya(size_t(n * 40)), yb(size_t(n * 24)), ra(ya.size()), rb(yb.size());
        linear(A.m, x.data(), n, ra.data(), act, pool);
        linear(B.m, x.data(), n, rb.data(), act, pool);
        for (ThreadPool* p : {&pool, static_cast<ThreadPool*>(nullptr)}) {
          std::fill(ya.begin(), ya.end(), -1.0f);
          std::fill(yb.begin(), yb.end(), -1.0f);
          linear_pair(A.m, ya.data(), B.m, yb.data(), x.data(), n, act, p);
          BOOST_TEST_CONTEXT("A " << int(fa) << " B " << int(fb) << " act " << to_string(act) << " pooled " << bool(p)) {
            BOOST_TEST(std::memcmp(ya.data(), ra.data(), ya.size() * 4) == 0);
            BOOST_TEST(std::memcmp(yb.data(), rb.data(), yb.size() * 4) == 0);
          }
        }
      }
}
