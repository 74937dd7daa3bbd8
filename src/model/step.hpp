// What one forward step's layers share: the batch's rows, their rotary
// tables, the cache, the threads, the debug hook, the phase timer.
#pragma once
#include <cstdint>

#include "common/thread_pool.hpp"
#include "model/batch.hpp"
#include "model/dump.hpp"
#include "model/kv_cache.hpp"
#include "model/linear.hpp"
#include "model/phase_times.hpp"
#include "model/rope.hpp"

namespace trillion {

struct Step {
  const Batch& batch;     // [n] rows (slot, pos)
  const float* rope_cos;  // [n, rope/2] cos(pos * inv_freq) * mscale of each row
  const float* rope_sin;  // [n, rope/2]
  const Rope& rope;
  KvCache& cache;
  ThreadPool& pool;
  Activations act;        // the compute path of the weight products (linear.hpp)
  const Dumper& dump;
  PhaseTimes* times = nullptr;  // where the step's phases add their time (null: not timed)
  int64_t n() const { return batch.size(); }
};

}  // namespace trillion
