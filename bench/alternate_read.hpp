// bench_model --read-probe: the read probe (calibrate/memory_probe.hpp, four
// streams per thread over a large array) run right after a timed decode
// step, so that the step's weight GB/s can be set against what the memory
// system gave a plain reader a few milliseconds later.
//
// Why: the bandwidth the fractions are taken of is the probe's best of many
// reads, taken once, minutes away from the steps, and this VM's read rate
// moves by a third within minutes (42-81 GB/s over a session). Whether a
// step streams at what the machine gives at its moment, or at a rate of its
// own, tells whether it is bound by the memory system or by something in
// the step (measured: reads 43-62 GB/s over six runs while INT4 batch-1
// steps streamed 35-40: the latter). Hence the correlation of the pairs
// beside the medians.
#pragma once
#include <cstddef>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/thread_pool.hpp"

namespace trillion::bench {

class AlternateRead {
 public:
  // Reads on the pool's threads (as the steps stream; separate threads
  // would compete with the pool's spinning workers); mib: the array read
  // each time, in all.
  AlternateRead(ThreadPool& pool, size_t mib);
  ~AlternateRead();
  AlternateRead(const AlternateRead&) = delete;
  AlternateRead& operator=(const AlternateRead&) = delete;

  // One read; `step_gbps` is the weight GB/s of the step just before it.
  void after_step(double step_gbps);
  // read GB/s median, min and max, the median of step / read and the
  // correlation of the pairs; empty before any step. Clears the record for
  // the next batch.
  nlohmann::json take();

 private:
  ThreadPool& pool_;
  std::vector<float*> parts_;
  size_t per_thread_ = 0;
  std::vector<double> steps_, reads_;
};

}  // namespace trillion::bench
