// A run's configuration from its flags, for `generate` and `score`: the run
// shape, the parallel mode, stages and layout, this rank's memory check and
// its thread count. Pure: no MPI and nothing large allocated, so every
// check of the flags against the model runs (and is tested) before a rank
// maps a weight; Cluster::set_up applies the result.
#pragma once
#include <cstdint>
#include <string>

#include "app/run_options.hpp"
#include "config/activations.hpp"
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
// from "auto" (as --metrics reports it; auto on FP8 from this rank's facts
// alone: a cluster passes the path its ranks agreed on). Throws InputError
// naming the flag or the model's limit a run would break.
RunConfig configure_run(RunOptions& o, const ModelStore& store, const RankPlace& place);

// --activations auto on an FP8 model (config/activations.hpp), this rank's
// part of the choice: "" when configure_run on the int8 path passes here
// (the layout for int8, then its int8 copy and the rest against this rank's
// memory, as an explicit --activations int8 is checked), else why not.
std::string int8_copy_misfit(const RunOptions& o, const ModelStore& store, const RankPlace& place);

// The line rank 0 prints when auto chose for an FP8 model: the path and why.
// bf16_slow: the first rank whose CPU does not run bf16 faster (its
// where()), when int8 or f32 was chosen; int8_misfit: that rank's where()
// and int8_copy_misfit, when f32 was chosen.
std::string auto_activations_notice(Activations chosen, const std::string& int8_misfit, const std::string& bf16_slow);

}  // namespace trillion::app
