// `trillion plan`'s inputs made whole: the model (a converted directory, or a
// config.json / HF directory planned as its conversion would be), the ranks
// and their hosts, each host's memory and profile, the links.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/model_config.hpp"
#include "plan/predict.hpp"
#include "store/manifest.hpp"

namespace trillion::app {

// "192G", "512GiB", "1.5T", "2000000000": bytes (K/M/G/T are powers of 1024,
// as memory is sold). Throws InputError naming `flag`.
int64_t parse_bytes(const std::string& s, const std::string& flag);
// "1,8,32": positive integers. Throws InputError naming `flag`.
std::vector<int64_t> parse_int_list(const std::string& s, const std::string& flag);

struct PlanModel {
  std::string source;     // what was given
  bool converted = false; // a converted model (real shard names) or a config
  ModelConfig config;
  Manifest manifest;
};
// --model DIR (converted) or --config FILE|HF_DIR (+ --quantize FMT).
PlanModel load_plan_model(const std::string& model_dir, const std::string& config, const std::string& quantize);

struct PlanHosts {
  std::vector<std::string> host_names;   // by host index
  std::vector<int> host_of_rank;
  std::vector<int64_t> memory;           // by host index, bytes
};
// Hosts from --hostfile, or --ranks with --ranks-per-host (0: every rank on
// one host unless a link profile says the ranks are apart).
PlanHosts plan_hosts(const std::string& hostfile, int ranks, int ranks_per_host, bool separate_hosts);

}  // namespace trillion::app
