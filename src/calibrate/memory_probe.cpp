#include "calibrate/memory_probe.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/error.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#define TRILLION_TARGET_AVX2 __attribute__((target("avx2,fma")))
#else
#define TRILLION_TARGET_AVX2
#endif

namespace trillion {
namespace {

using clock_type = std::chrono::steady_clock;

// Sum of floats with 4 independent vector accumulators (enough loads in flight).
#if defined(__x86_64__)
TRILLION_TARGET_AVX2 float sum_avx2(const float* p, size_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
  }
  __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
  float out[8];
  _mm256_storeu_ps(out, s);
  float t = 0;
  for (float v : out) t += v;
  for (; i < n; ++i) t += p[i];
  return t;
}

// The same sum read as 4 concurrent sequential streams (the array's quarters):
// a core pulls more with several streams in flight than with one (about
// 1.5x on the machines here), and the matmul kernels read 4
// streams (matmul_avx2.cpp), so this is the limit they are held to.
TRILLION_TARGET_AVX2 float sum4_avx2(const float* p, size_t n) {
  const size_t q = n / 4 / 8 * 8;
  const float *p0 = p, *p1 = p + q, *p2 = p + 2 * q, *p3 = p + 3 * q;
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i < q; i += 8) {
    a0 = _mm256_add_ps(a0, _mm256_load_ps(p0 + i));
    a1 = _mm256_add_ps(a1, _mm256_load_ps(p1 + i));
    a2 = _mm256_add_ps(a2, _mm256_load_ps(p2 + i));
    a3 = _mm256_add_ps(a3, _mm256_load_ps(p3 + i));
  }
  __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
  float out[8];
  _mm256_storeu_ps(out, s);
  float t = 0;
  for (float v : out) t += v;
  for (size_t i = 4 * q; i < n; ++i) t += p[i];
  return t;
}

#else
float sum_avx2(const float* p, size_t n) {
  float a[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) a[k] += p[i + size_t(k)];
  float t = 0;
  for (float v : a) t += v;
  for (; i < n; ++i) t += p[i];
  return t;
}
float sum4_avx2(const float* p, size_t n) {  // 4 streams, portable
  const size_t q = n / 4;
  float a[4] = {};
  for (size_t i = 0; i < q; ++i)
    for (int k = 0; k < 4; ++k) a[k] += p[size_t(k) * q + i];
  float t = a[0] + a[1] + a[2] + a[3];
  for (size_t i = 4 * q; i < n; ++i) t += p[i];
  return t;
}
#endif

volatile float g_sink;

}  // namespace

// streams: 1 (sum_avx2) or 4 (sum4_avx2) per thread.
double read_gbps(const std::vector<float*>& parts, size_t per_thread, int reps, int streams) {
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    std::vector<std::thread> ts;
    auto t0 = clock_type::now();
    for (size_t t = 0; t < parts.size(); ++t)
      ts.emplace_back([&, t] {
        g_sink = streams == 4 ? sum4_avx2(parts[t], per_thread) : sum_avx2(parts[t], per_thread);
      });
    for (auto& th : ts) th.join();
    const double s = std::chrono::duration<double>(clock_type::now() - t0).count();
    best = std::max(best, double(parts.size() * per_thread * sizeof(float)) / s / 1e9);
  }
  return best;
}

double read_gbps_once(ThreadPool& pool, const std::vector<float*>& parts, size_t per_thread, int streams) {
  if (int(parts.size()) != pool.size()) throw Error("read_gbps_once: one part per pool thread");
  const auto t0 = clock_type::now();
  pool.parallel_for(pool.size(), 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t)
      g_sink = streams == 4 ? sum4_avx2(parts[size_t(t)], per_thread) : sum_avx2(parts[size_t(t)], per_thread);
  });
  const double s = std::chrono::duration<double>(clock_type::now() - t0).count();
  return double(parts.size() * per_thread * sizeof(float)) / s / 1e9;
}

std::vector<float*> probe_arrays(int threads, size_t per_thread) {
  std::vector<float*> parts;
  for (int t = 0; t < threads; ++t) {
    float* p = static_cast<float*>(std::aligned_alloc(64, per_thread * sizeof(float)));
    for (size_t i = 0; i < per_thread; ++i) p[i] = float(i & 7);  // touch every page
    parts.push_back(p);
  }
  return parts;
}

void free_probe_arrays(std::vector<float*>& parts) {
  for (float* p : parts) std::free(p);
  parts.clear();
}

size_t probe_floats_per_thread(int threads, size_t mib) {
  return mib * (size_t(1) << 20) / sizeof(float) / size_t(threads) / 32 * 32;
}

double measure_read_gbps(int threads, size_t mib, int rounds) {
  const size_t per = probe_floats_per_thread(threads, mib);
  std::vector<float*> parts = probe_arrays(threads, per);
  double best = 0;
  for (int r = 0; r < rounds; ++r)
    best = std::max({best, read_gbps(parts, per, 3, 1), read_gbps(parts, per, 3, 4)});
  free_probe_arrays(parts);
  return best;
}

}  // namespace trillion
