// A run's configuration from its flags, for `generate` and `score`: the run
// shape, the parallel mode, stages and layout, this rank's memory check and
// its thread count. Pure: no MPI and nothing large allocated, so every
// check of the flags against the model runs (and is tested) before a rank
// maps a weight; Cluster::set_up applies the result.
#pragma once
#include <cstdint>

#include "app/run_options.hpp"
#include "parallel/run_shape.hpp"
#include "plan/layout.hpp"
#include "store/model_store.hpp"

namespace trillion::app {

// What a rank's configuration depends on besides the flags and the model:
// the job's size and its own place, and its host's resources (MpiEnv and
// the platform give them in a run; tests make them up).
struct RankPlace {
  int ranks = 1;
  int rank = 0;
  int ranks_on_host = 1;
  double host_memory_bytes = 0;  // physical memory of the host (0: unknown, not checked)
  int physical_cores = 1;
  int hardware_threads = 1;      // std::thread::hardware_concurrency()
  int thread_limit = 64;         // common/thread_pool.hpp's thread_limit() (at least 64 on any host)
};

struct RunConfig {
  RunShape shape;
  Layout layout;               // its mode is the run's parallel mode
  int threads = 1;             // this rank's thread pool
  bool cores_to_spare = true;  // no thread competes for a core: workers may spin for work (ThreadPool)
};

// The flags checked alone, before the model opens: each error names its flag.
void check_run_flags(const RunOptions& o);

// The rest, with the model open. Sets o.activations to the path resolved
// from "auto" (as --metrics reports it). Throws InputError naming the flag
// or the model's limit a run would break.
RunConfig configure_run(RunOptions& o, const ModelStore& store, const RankPlace& place);

}  // namespace trillion::app
