// trillion convert --input HF_DIR --output MODEL_DIR [--experts-per-shard N] [--force] [--quantize int8|int4|fp8]
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
  std::string quantize;
  po::options_description desc("options");
  desc.add_options()
      ("input,i", po::value(&o.input_dir)->required(),
       "Hugging Face checkpoint directory (config.json, model.safetensors.index.json, *.safetensors)")
      ("output,o", po::value(&o.output_dir)->required(),
       "model directory to create (written as OUTPUT.partial, renamed when complete)")
      ("experts-per-shard", po::value(&o.experts_per_shard)->default_value(o.experts_per_shard),
       "routed experts per HDF5 shard file")
      ("force", po::bool_switch(&o.force), "replace an existing converted model at OUTPUT")
      ("quantize", po::value(&quantize),
       "int8|int4|fp8: requantize a bf16 checkpoint's linear layers (incl. lm_head); prints the error per role "
       "and writes quantization.json")
      ("threads", po::value(&o.threads)->default_value(0), "quantization threads (0: every core)")
      ("quiet,q", po::bool_switch(&quiet), "no progress (warnings are still printed)");
  if (!parse_args(args,
                  "usage: trillion convert --input HF_DIR --output MODEL_DIR [--experts-per-shard N] [--force]\n"
                  "                        [--quantize int8|int4|fp8]\n\n"
                  "Checks the checkpoint against its config.json, then copies every tensor's bytes unchanged\n"
                  "into sharded HDF5 (docs/format.md) with an XXH64 checksum per tensor. --quantize requantizes\n"
                  "a bf16 checkpoint: every linear layer and lm_head to int8 (bf16 scale per 32 columns), int4\n"
                  "(group 32) or fp8 (e4m3, 128x128 blocks); the quantization error is printed per role.",
                  desc))
    return 0;
  if (!quantize.empty()) {
    if (quantize == "int8") o.quantize = WeightFormat::int8_group;
    else if (quantize == "int4") o.quantize = WeightFormat::int4_group;
    else if (quantize == "fp8") o.quantize = WeightFormat::fp8_block;
    else throw po::error("--quantize must be int8, int4 or fp8, got '" + quantize + "'");
  }
  // Warnings always go to stderr; the progress meter only without --quiet.
  o.log = &std::cerr;
  if (quiet) o.log = nullptr;
  const ConvertReport r = convert_checkpoint(o);
  if (quiet)
    for (const std::string& w : r.warnings) std::fprintf(stderr, "trillion convert: warning: %s\n", w.c_str());
  const double mbps = r.seconds > 0 ? double(r.input_bytes) / 1e6 / r.seconds : 0.0;
  if (r.quantization) {
    print_quantization(std::cout, *r.quantization);
    std::cout << "  (written to " << o.output_dir << "/quantization.json)\n";
    std::fprintf(stderr,
                 "trillion convert: %lld tensors, %.2f GB %s read, %.2f GB %s written in %lld shards, %.1f s "
                 "(%.0f MB/s read) -> %s\n",
                 (long long)r.tensors, double(r.input_bytes) / 1e9, to_string(r.quantization->from),
                 double(r.bytes) / 1e9, to_string(r.quantization->format), (long long)r.shards, r.seconds, mbps,
                 o.output_dir.c_str());
  } else {
    std::fprintf(stderr, "trillion convert: %lld tensors, %.2f GB in %lld shards, %.1f s (%.0f MB/s) -> %s\n",
                 (long long)r.tensors, double(r.bytes) / 1e9, (long long)r.shards, r.seconds, mbps,
                 o.output_dir.c_str());
  }
  return 0;
}

}  // namespace trillion::app
