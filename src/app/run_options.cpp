#include "app/run_options.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "common/error.hpp"
#include "engine/local_runner.hpp"

namespace po = boost::program_options;

namespace trillion::app {

void add_run_options(po::options_description& desc, RunOptions& o) {
  desc.add_options()
      ("model", po::value(&o.model_dir)->required(), "converted model directory (trillion convert)")
      ("threads", po::value(&o.threads)->default_value(0), "threads per rank (0: all cores)")
      ("max-batch", po::value(&o.max_batch)->default_value(8), "sequence slots decoded together")
      ("max-len", po::value(&o.max_len)->default_value(0),
       "positions per sequence (0: min(max_position_embeddings, 4096))")
      ("step-tokens", po::value(&o.step_tokens)->default_value(256), "prefill tokens per step")
      ("no-verify", po::bool_switch()->notifier([&o](bool v) { o.verify = !v; }),
       "skip checksum verification of the weights");
}

LoadedModel load_model(const RunOptions& o) {
  if (const char* ws = std::getenv("OMPI_COMM_WORLD_SIZE"); ws && std::atoi(ws) > 1)
    throw InputError("launched on " + std::string(ws) +
                     " ranks, but this build runs on one rank only (-np 1)");
  if (o.max_batch < 1) throw InputError("--max-batch must be at least 1");
  if (o.step_tokens < 1) throw InputError("--step-tokens must be at least 1");
  if (o.threads < 0) throw InputError("--threads must be >= 0");
  LoadedModel m;
  m.store = ModelStore::open(o.model_dir, StoreOptions{o.verify});
  const ModelConfig& cfg = m.store->config();
  int64_t max_len = o.max_len > 0 ? o.max_len : std::min<int64_t>(cfg.max_position_embeddings, 4096);
  if (max_len > cfg.max_position_embeddings)
    throw InputError("--max-len " + std::to_string(max_len) + " exceeds the model's max_position_embeddings (" +
                     std::to_string(cfg.max_position_embeddings) + ")");
  m.pool = std::make_unique<ThreadPool>(o.threads);
  m.runner = std::make_unique<LocalRunner>(cfg, *m.store, *m.pool, o.max_batch, int32_t(max_len));
  return m;
}

bool parse_args(const std::vector<std::string>& args, const char* usage, po::options_description& desc,
                po::positional_options_description* positional) {
  po::options_description all(desc);
  bool help = false;
  all.add_options()("help,h", po::bool_switch(&help), "show this help");
  po::variables_map vm;
  auto parser = po::command_line_parser(args).options(all);
  if (positional) parser.positional(*positional);
  po::store(parser.run(), vm);
  if (help) {
    std::cout << usage << "\n\n" << all << "\n";
    return false;
  }
  po::notify(vm);
  return true;
}

}  // namespace trillion::app
