#include "app/run_options.hpp"

#include <cstdio>
#include <iostream>

namespace po = boost::program_options;

namespace trillion::app {

void add_run_options(po::options_description& desc, RunOptions& o) {
  desc.add_options()
      ("model", po::value(&o.model_dir)->required(), "converted model directory (trillion convert)")
      ("threads", po::value(&o.threads)->default_value(0), "threads per rank (0: the host's physical cores divided among its ranks)")
      ("max-batch", po::value(&o.max_batch)->default_value(8), "sequence slots decoded together")
      ("max-len", po::value(&o.max_len)->default_value(0),
       "positions per sequence (0: min(max_position_embeddings, 4096))")
      ("step-tokens", po::value(&o.step_tokens)->default_value(256), "prefill tokens per step")
      ("kv-cache-tokens", po::value(&o.kv_cache_tokens)->default_value(0),
       "KV-cache positions per rank, shared by all slots in blocks of 64 (0: max-batch x max-len); "
       "a request waits until its prompt + max_tokens fit")
      ("parallel", po::value(&o.parallel)->default_value("pipeline"), "pipeline | expert (with several ranks)")
      ("stages", po::value(&o.stages),
       "pipeline layer ranges per rank, e.g. 0-14,15-30, or auto: balanced by the predicted time of a decode step "
       "at --max-batch (trillion plan's model; default: balanced by bytes)")
      ("head-split", po::value(&o.head_split),
       "pipeline: lm_head rows [0, N) on the first stage, the rest on the last, which sends its normed rows "
       "and logit columns back (finer balance than whole layers); auto: as --stages auto chooses (the default "
       "with --stages auto; else 0, the whole head on the last stage)")
      ("profile", po::value(&o.profile),
       "host profile JSON (trillion calibrate) that --stages auto predicts with (default: built in)")
      ("micro-batches", po::value(&o.micro_batches)->default_value(0),
       "pipeline: steps in flight (0: one per stage); expert: groups of each rank's rows that take turns at "
       "the MoE layers, so one group computes while another's tokens travel (0: 2; 1: off)")
      ("activations", po::value(&o.activations)->default_value("auto"),
       "compute path of the weight products: f32 (exact: float32 activations) | int8 (activations quantized "
       "per token to int8 in groups of 32, integer dot products with INT8/INT4 weights) | bf16 (FP8 weights "
       "and activations rounded to bf16, bf16 dot products; no copy of the weights) | auto (int8 for "
       "INT8/INT4 models, f32 for BF16; FP8: int8 where its int8 copy fits every rank's memory, else bf16 where "
       "every rank's CPU runs it faster than f32, else f32)")
      ("metrics", po::value(&o.metrics_path), "write run metrics (JSON) to this file")
      ("metrics-interval", po::value(&o.metrics_interval)->default_value(15),
       "seconds between running updates of --metrics (\"final\": false, rank 0's figures); 0: only at the end")
      ("no-verify", po::bool_switch()->notifier([&o](bool v) { o.verify = !v; }),
       "skip checksum verification of the weights")
      ("no-prefix-sharing", po::bool_switch()->notifier([&o](bool v) { o.prefix_sharing = !v; }),
       "compute every request's prompt in full: by default the tokens a request starts with in common with an "
       "earlier request of the job are read from the KV cache (the same results either way)");
}

bool parse_args(const std::vector<std::string>& args, const char* usage, po::options_description& desc,
                po::positional_options_description* positional) {
  po::options_description all(desc);
  all.add_options()("help,h", "show this help");
  po::variables_map vm;
  auto parser = po::command_line_parser(args).options(all);
  if (positional) parser.positional(*positional);
  po::store(parser.run(), vm);
  if (vm.count("help")) {
    std::cout << usage << "\n\n" << all << "\n";
    return false;
  }
  po::notify(vm);
  return true;
}

}  // namespace trillion::app
