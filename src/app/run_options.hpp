// Options shared by the commands that run the model (score, generate), and
// argument parsing shared by every command.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

namespace trillion::app {

struct RunOptions {
  std::string model_dir;
  int threads = 0;          // 0: hardware concurrency
  int32_t max_batch = 8;    // sequence slots
  int32_t max_len = 0;      // positions per slot; 0: min(max_position_embeddings, 4096)
  int64_t kv_cache_tokens = 0;  // KV-cache pool positions per rank; 0: max_batch x max_len
  int64_t step_tokens = 256;
  bool verify = true;
  std::string parallel = "pipeline";
  std::string stages;       // --stages override, or "auto" (balanced by predicted time)
  std::string head_split;   // --head-split rows | auto ("": auto with --stages auto, else none)
  std::string profile;      // --profile HOST.json: the host figures --stages auto predicts with
  int micro_batches = 0;    // pipeline steps in flight (0: one per stage); expert: row groups (0: 2)
  std::string activations = "auto";  // --activations auto | f32 | int8 (config/activations.hpp)
  std::string metrics_path; // --metrics FILE.json
  double metrics_interval = 15;  // seconds between running updates of --metrics (0: only at the end)
  std::string speculative;  // generate --speculative mtp ("" : plain decoding)
  bool prefix_sharing = true;  // --no-prefix-sharing turns it off (scheduler/prefix_cache.hpp)
};

void add_run_options(boost::program_options::options_description& desc, RunOptions& o);

// Parses argv-style args against desc; prints help and returns false for --help.
bool parse_args(const std::vector<std::string>& args, const char* usage,
                boost::program_options::options_description& desc,
                boost::program_options::positional_options_description* positional = nullptr);

}  // namespace trillion::app
