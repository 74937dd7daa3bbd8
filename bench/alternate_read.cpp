#include "alternate_read.hpp"

#include <algorithm>
#include <cmath>

#include "bench_stats.hpp"
#include "calibrate/memory_probe.hpp"

namespace trillion::bench {

namespace {
// Pearson's r of the pairs (x[i], y[i]); 0 when either does not vary.
double correlation(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = double(x.size());
  double mx = 0, my = 0;
  for (size_t i = 0; i < x.size(); ++i) mx += x[i] / n, my += y[i] / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < x.size(); ++i)
    sxy += (x[i] - mx) * (y[i] - my), sxx += (x[i] - mx) * (x[i] - mx), syy += (y[i] - my) * (y[i] - my);
  return sxx > 0 && syy > 0 ? sxy / std::sqrt(sxx * syy) : 0.0;
}
}  // namespace

AlternateRead::AlternateRead(ThreadPool& pool, size_t mib)
    : pool_(pool), per_thread_(probe_floats_per_thread(pool.size(), mib)) {
  parts_ = probe_arrays(pool.size(), per_thread_);
}

AlternateRead::~AlternateRead() { free_probe_arrays(parts_); }

void AlternateRead::after_step(double step_gbps) {
  steps_.push_back(step_gbps);
  reads_.push_back(read_gbps_once(pool_, parts_, per_thread_, 4));
}

nlohmann::json AlternateRead::take() {
  nlohmann::json j;
  if (reads_.empty()) return j;
  const auto [lo, hi] = std::minmax_element(reads_.begin(), reads_.end());
  j["reads"] = reads_.size();
  j["read_gbps_median"] = median(reads_);
  j["read_gbps_min"] = *lo;
  j["read_gbps_max"] = *hi;
  std::vector<double> ratios(reads_.size());
  for (size_t i = 0; i < reads_.size(); ++i) ratios[i] = steps_[i] / reads_[i];
  j["step_over_read_median"] = median(ratios);
  j["step_read_correlation"] = correlation(steps_, reads_);
  steps_.clear();
  reads_.clear();
  return j;
}

}  // namespace trillion::bench
