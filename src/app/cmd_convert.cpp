// trillion convert --input HF_DIR --output MODEL_DIR [--experts-per-shard N] [--force]
#include <cstdio>
#include <iostream>

#include "app/commands.hpp"
#include "app/run_options.hpp"
#include "store/converter.hpp"

namespace po = boost::program_options;

namespace trillion::app {

int run_convert(const Args& args) {
  ConvertOptions o;
  bool quiet = false;
  po::options_description desc("options");
  desc.add_options()
      ("input,i", po::value(&o.input_dir)->required(),
       "Hugging Face checkpoint directory (config.json, model.safetensors.index.json, *.safetensors)")
      ("output,o", po::value(&o.output_dir)->required(),
       "model directory to create (written as OUTPUT.partial, renamed when complete)")
      ("experts-per-shard", po::value(&o.experts_per_shard)->default_value(o.experts_per_shard),
       "routed experts per HDF5 shard file")
      ("force", po::bool_switch(&o.force), "replace an existing converted model at OUTPUT")
      ("quiet,q", po::bool_switch(&quiet), "no progress (warnings are still printed)");
  if (!parse_args(args,
                  "usage: trillion convert --input HF_DIR --output MODEL_DIR [--experts-per-shard N] [--force]\n\n"
                  "Checks the checkpoint against its config.json, then copies every tensor's bytes unchanged\n"
                  "into sharded HDF5 (docs/FORMAT.md) with an XXH64 checksum per tensor.",
                  desc))
    return 0;
  // Warnings always go to stderr; the progress meter only without --quiet.
  o.log = &std::cerr;
  if (quiet) o.log = nullptr;
  const ConvertReport r = convert_checkpoint(o);
  if (quiet)
    for (const std::string& w : r.warnings) std::fprintf(stderr, "trillion convert: warning: %s\n", w.c_str());
  std::fprintf(stderr, "trillion convert: %lld tensors, %.2f GB in %lld shards, %.1f s (%.0f MB/s) -> %s\n",
               (long long)r.tensors, double(r.bytes) / 1e9, (long long)r.shards, r.seconds,
               r.seconds > 0 ? double(r.bytes) / 1e6 / r.seconds : 0.0, o.output_dir.c_str());
  return 0;
}

}  // namespace trillion::app
