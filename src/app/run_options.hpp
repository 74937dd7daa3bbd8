// Options shared by the commands that run the model (score, generate), and
// the model/runner set-up they share.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include <boost/program_options.hpp>

#include "common/thread_pool.hpp"
#include "engine/step_runner.hpp"
#include "store/model_store.hpp"

namespace trillion::app {

struct RunOptions {
  std::string model_dir;
  int threads = 0;          // 0: hardware concurrency
  int32_t max_batch = 8;    // sequence slots
  int32_t max_len = 0;      // positions per slot; 0: min(max_position_embeddings, 4096)
  int64_t step_tokens = 256;
  bool verify = true;
};

void add_run_options(boost::program_options::options_description& desc, RunOptions& o);

// The opened model and a runner over it; lives for the whole command.
struct LoadedModel {
  std::unique_ptr<ModelStore> store;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<StepRunner> runner;
};

LoadedModel load_model(const RunOptions& o);

// Parses argv-style args against desc; prints help and returns false for --help.
bool parse_args(const std::vector<std::string>& args, const char* usage,
                boost::program_options::options_description& desc,
                boost::program_options::positional_options_description* positional = nullptr);

}  // namespace trillion::app
