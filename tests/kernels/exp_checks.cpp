#include "exp_checks.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "kernels/expf.hpp"
#include "kernels/kernel_table.hpp"

namespace trillion::test {
namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
bool same(float a, float b) { return bits(a) == bits(b) || (std::isnan(a) && std::isnan(b)); }

// The 48 floats whose exp_f32 before its last rounding (y * s, a double)
// lies nearest a float rounding boundary, found by a search over every float
// in the fast path's range with a normal result (the nearest is on one):
// where any change in the operations' order or rounding shows first (an
// unfused r = 32/ln2 x - kd changes 2 of 2^32 results; a stride never finds them).
constexpr uint32_t kHardestToRound[] = {
    0x3e73ade2, 0xbfde3004, 0xbbe861b2, 0x3d8932e8, 0x400d98c7, 0x3b37991a,
    0xba253b54, 0x337fffff, 0x33800000, 0x343fffff, 0x34dffffd, 0x37ff7f01,
    0x356ffff9, 0x3b0b4517, 0x3fbe11a6, 0x40143eb5, 0x4202422f, 0x35f7fff1,
    0xc0d7626b, 0x367bffe1, 0x40c12c37, 0x4197276c, 0xba921bd7, 0xbeae4609,
    0xc1d2107a, 0x36fdffc1, 0xbb378639, 0x387ebe05, 0xb9fbab76, 0xbe14c82c,
    0x377eff81, 0x38fddc11, 0xc068da36, 0xb9a56aae, 0xbf0fa174, 0x3b50125a,
    0x337ffffe, 0x3d103181, 0x40a63bf9, 0xbc70a558, 0x3b8f4138, 0xb3000001,
    0xb3c00001, 0xb4200001, 0xbac75bcb, 0xbc3f2901, 0xb4b00002, 0xbd3e69a5,
};

// Every stride-th bit pattern from a start that moves with the stride (so
// different strides see different floats), then the edges of every special
// case of glibc's expf and of the fast path's range, in blocks of up to 2^20
// (stride 1, every float, never holds them all).
void sweep(uint32_t stride, const std::function<void(const std::vector<float>&)>& block) {
  std::vector<float> xs;
  xs.reserve(size_t(1) << 20);
  for (uint64_t u = stride / 3; u <= 0xffffffffull; u += stride) {
    xs.push_back(from_bits(uint32_t(u)));
    if (xs.size() == xs.capacity()) block(xs), xs.clear();
  }
  for (float edge : {0.0f, 88.0f, 0x1.62e42ep6f, 0x1.9d1d9ep6f, 0x1.9fe368p6f, 87.33f, 103.0f, 1e-30f, 1.0f,
                     std::numeric_limits<float>::infinity(), std::numeric_limits<float>::denorm_min(),
                     std::numeric_limits<float>::max()})
    for (float s : {1.0f, -1.0f})
      for (int d = -2; d <= 2; ++d) {
        const int64_t b = int64_t(bits(s * edge)) + d;
        if (b >= 0 && b <= 0xffffffffll) xs.push_back(from_bits(uint32_t(b)));
      }
  for (uint32_t b : kHardestToRound) xs.push_back(from_bits(b));
  xs.push_back(std::numeric_limits<float>::quiet_NaN());
  block(xs);
}

struct Misses {
  int64_t count = 0;
  std::string first;
  void add(const std::string& what) {
    if (count++ < 4) first += what + "; ";
  }
  std::string report() const { return count ? std::to_string(count) + " misses: " + first : ""; }
};

std::string hex(float f) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", double(f));
  return buf;
}

}  // namespace

std::string exp_accuracy_misses(uint32_t stride) {
  Misses m;
  sweep(stride, [&](const std::vector<float>& xs) {
    for (float x : xs) {
      const float got = exp_f32(x);
      const double want = std::exp(double(x));  // within a double ulp: far finer than a float ulp
      bool ok;
      if (std::isnan(x)) ok = std::isnan(got);
      else if (want > double(std::numeric_limits<float>::max())) ok = std::isinf(got) && got > 0;
      else if (want < double(std::numeric_limits<float>::min()))
        ok = got >= 0 && std::fabs(double(got) - want) <= double(std::numeric_limits<float>::denorm_min());
      else ok = std::fabs(double(got) - want) <= std::ldexp(1.0, std::ilogb(want) - 23);  // one float ulp of want
      if (!ok) m.add("exp_f32(" + hex(x) + ") = " + hex(got));
    }
  });
  // The special cases, exactly.
  const float inf = std::numeric_limits<float>::infinity();
  if (!same(exp_f32(-inf), 0.0f) || !same(exp_f32(inf), inf) || !std::isnan(exp_f32(std::nanf(""))) ||
      !same(exp_f32(0.0f), 1.0f) || !same(exp_f32(89.0f), inf) || !same(exp_f32(-104.0f), 0.0f))
    m.add("special cases");
  return m.report();
}

std::string exp_path_misses(KernelIsa isa, uint32_t stride) {
  const KernelTable& k = kernel_table(isa);
  const std::string name = to_string(isa);
  Misses m;
  bool first_block = true;
  std::vector<float> want, got;  // reused: stride 1 runs 4096 blocks
  sweep(stride, [&](const std::vector<float>& xs) {
    want.resize(xs.size());
    got.resize(xs.size() + 32);
    for (size_t i = 0; i < xs.size(); ++i) want[i] = exp_f32(xs[i]);
    // Calls of lengths 1, 2, .., 19, 1, 2, .. down the block: every length
    // at many alignments, and (many calls holding some |x| >= 88) both kinds
    // of vector step.
    size_t len = 1;
    for (size_t i = 0; i < xs.size(); i += len, len = len % 19 + 1) {
      const size_t n = std::min(len, xs.size() - i);
      got[0] = got[1 + n] = -1.0f;
      k.exp_each(&xs[i], &got[1], int64_t(n));
      for (size_t j = 0; j < n; ++j)
        if (!same(got[1 + j], want[i + j]))
          m.add(name + " exp(" + hex(xs[i + j]) + ") = " + hex(got[1 + j]) + ", exp_f32 " + hex(want[i + j]));
      if (got[0] != -1.0f || got[1 + n] != -1.0f) m.add(name + " wrote outside y");
    }
    if (first_block) {  // in place (y == x) gives the same bits
      std::vector<float> inplace(xs.begin(), xs.begin() + std::min<size_t>(xs.size(), 1000));
      k.exp_each(inplace.data(), inplace.data(), int64_t(inplace.size()));
      for (size_t i = 0; i < inplace.size(); ++i)
        if (!same(inplace[i], want[i])) m.add(name + " in place differs at " + hex(xs[i]));
      first_block = false;
    }
  });
  return m.report();
}

bool libm_expf_is_glibc_fma(std::string& why_not) {
#if defined(__GLIBC__) && defined(__x86_64__)
  if (cpu_has_avx2_fma_f16c()) return true;
  why_not = "this CPU lacks FMA or AVX2: glibc runs its SSE2 build of expf, which rounds differently in rare cases";
  return false;
#else
  why_not = "not glibc on x86-64: std::exp is another library's expf (glibc's aarch64 build, for one, rounds 32x/ln2 first)";
  return false;
#endif
}

std::string exp_libm_misses(uint32_t stride) {
  Misses m;
  sweep(stride, [&](const std::vector<float>& xs) {
    for (float x : xs) {
      const float got = exp_f32(x), want = std::exp(x);
      if (!same(got, want)) m.add("exp_f32(" + hex(x) + ") = " + hex(got) + ", std::exp " + hex(want));
    }
  });
  return m.report();
}

}  // namespace trillion::test
