// The few statistics bench_model's parts report: wall time, and quantiles of
// samples taken on a machine too noisy for means.
#pragma once
#include <algorithm>
#include <chrono>
#include <vector>

namespace trillion::bench {

using Clock = std::chrono::steady_clock;
inline double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The q-quantile of v (0 <= q <= 1) by linear interpolation between the
// samples around it; 0 for no samples.
inline double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const double x = q * double(v.size() - 1);
  const size_t i = size_t(x);
  return i + 1 < v.size() ? v[i] + (x - double(i)) * (v[i + 1] - v[i]) : v[i];
}
inline double median(std::vector<double> v) { return quantile(std::move(v), 0.5); }

}  // namespace trillion::bench
