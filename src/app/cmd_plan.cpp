// trillion plan --model DIR (--ranks N | --hostfile FILE [-np N]) [--parallel pipeline|expert] [--stages ...]
// Which rank holds which layers and experts, the bytes each maps, and the
// shard files each host needs (copy only those).
#include <cstdio>
#include <iostream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "app/commands.hpp"
#include "app/plan_mtp.hpp"
#include "app/run_options.hpp"
#include "common/error.hpp"
#include "model/kv_cache.hpp"
#include "model/kv_pools.hpp"
#include "model/linear.hpp"
#include "plan/hostfile.hpp"
#include "plan/layout.hpp"
#include "store/manifest.hpp"
#include "store/model_store.hpp"

namespace po = boost::program_options;

namespace trillion::app {

namespace {

std::string gib(int64_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f GiB", double(b) / double(1ll << 30));
  return buf;
}

}  // namespace

int run_plan(const Args& args) {
  std::string model_dir, hostfile, parallel = "pipeline", stages, activations = "auto";
  int ranks = 0, kv_slots = 8, kv_len = 4096;
  int64_t kv_tokens = 0;
  bool as_json = false;
  po::options_description desc("options");
  desc.add_options()
      ("model", po::value(&model_dir)->required(), "converted model directory")
      ("ranks,n", po::value(&ranks), "number of ranks (default: the hostfile's slots)")
      ("hostfile", po::value(&hostfile), "Open MPI hostfile: name the host of each rank")
      ("parallel", po::value(&parallel)->default_value("pipeline"), "pipeline | expert")
      ("stages", po::value(&stages), "pipeline layer ranges per rank, e.g. 0-14,15-30")
      ("max-batch", po::value(&kv_slots)->default_value(8), "sequence slots (for the KV cache estimate)")
      ("max-len", po::value(&kv_len)->default_value(4096), "positions per slot (for the KV cache estimate)")
      ("kv-cache-tokens", po::value(&kv_tokens)->default_value(0),
       "KV-cache positions per rank, as for generate (0: max-batch x max-len)")
      ("activations", po::value(&activations)->default_value("auto"), "compute path, as for generate: auto | f32 | int8")
      ("json", po::bool_switch(&as_json), "print JSON");
  if (!parse_args(args, "usage: trillion plan --model DIR --ranks N [--parallel pipeline|expert]", desc)) return 0;

  std::vector<std::string> hosts;
  if (!hostfile.empty()) {
    auto entries = read_hostfile(hostfile);
    if (ranks == 0)
      for (const auto& h : entries) ranks += h.slots;
    hosts = map_ranks(entries, ranks, hostfile);
  }
  if (ranks < 1) throw InputError("give --ranks N (N >= 1) or --hostfile");
  auto store = ModelStore::open(model_dir, StoreOptions{false});
  const ModelConfig& cfg = store->config();
  const Manifest& man = store->manifest();
  const Activations act = resolve_activations(activations, man.weight_format);
  const ParallelMode mode = parse_parallel_mode(parallel);

  const Layout layout = make_layout(cfg, model_sizes(cfg, man), mode, ranks, stages);

  // KV cache per rank: its pool of blocks (KvPools::pool_blocks, as the run allocates it) over its layers.
  nlohmann::json j = {{"model", model_dir}, {"parallel", to_string(mode)}, {"ranks", ranks},
                      {"activations", to_string(act)}};
  std::map<std::string, std::set<std::string>> files_by_host;
  for (int r = 0; r < ranks; ++r) {
    const RankShare& s = layout.ranks[size_t(r)];
    const int64_t slots = mode == ParallelMode::expert ? (kv_slots - r + ranks - 1) / ranks : kv_slots;
    const int64_t kv = KvCache::pool_bytes(
        cfg, s.layers.size(), KvPools::pool_blocks(int32_t(std::max<int64_t>(slots, 1)), kv_len, kv_tokens));
    const auto files = share_files(cfg, man, s);
    const std::string host = hosts.empty() ? "" : hosts[size_t(r)];
    for (const auto& f : files) files_by_host[host.empty() ? "rank " + std::to_string(r) : host].insert(f);
    j["per_rank"].push_back({{"rank", r},
                             {"host", host},
                             {"layers", {s.layers.begin, s.layers.end - 1}},
                             {"embed", s.layers.has_embed},
                             {"head", s.layers.has_head},
                             {"experts", {s.experts.begin, s.experts.end - 1}},
                             {"weight_bytes", share_bytes(cfg, man, s)},
                             {"int8_copy_bytes", requantizes_fp8(act, man.weight_format) ? share_int8_copy_bytes(cfg, man, s) : 0},
                             {"kv_cache_bytes", kv},
                             {"mtp", mtp_footprint(cfg, man, s, kv / std::max<int64_t>(1, s.layers.size()))},
                             {"files", files}});
  }
  if (as_json) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::printf("%s: %s, %lld layers, %lld routed experts per MoE layer; %s over %d rank%s\n", model_dir.c_str(),
              cfg.model_type.c_str(), (long long)cfg.num_hidden_layers, (long long)cfg.n_routed_experts,
              to_string(mode), ranks, ranks > 1 ? "s" : "");
  std::printf("compute path: %s\n", act == Activations::int8
                                       ? "int8 (activations quantized to int8, integer dot products with INT8/INT4 "
                                         "weights, FP8 ones requantized to int8 at load; BF16 and the router in float32)"
                                       : "f32 (float32 activations and accumulation: exact)");
  const bool copies = requantizes_fp8(act, man.weight_format);
  if (copies)
    std::printf("FP8 weights on the int8 path: each rank also holds its FP8 linears as int8 groups (\"int8 copy\")\n");
  std::printf("\n%-5s %-14s %-12s %-6s %-5s %-10s %-14s %-14s %s%s\n", "rank", "host", "layers", "embed", "head",
              "experts", "weights", "kv cache", copies ? "int8 copy      " : "", "files");
  for (const auto& r : j["per_rank"]) {
    const std::string copy = copies ? gib(r["int8_copy_bytes"].get<int64_t>()) : "";
    std::printf("%-5d %-14s %-12s %-6s %-5s %-10s %-14s %-14s %-*s%zu\n", r["rank"].get<int>(),
                r["host"].get<std::string>().c_str(),
                (std::to_string(r["layers"][0].get<int>()) + "-" + std::to_string(r["layers"][1].get<int>())).c_str(),
                r["embed"].get<bool>() ? "yes" : "", r["head"].get<bool>() ? "yes" : "",
                (std::to_string(r["experts"][0].get<int>()) + "-" + std::to_string(r["experts"][1].get<int>())).c_str(),
                gib(r["weight_bytes"].get<int64_t>()).c_str(), gib(r["kv_cache_bytes"].get<int64_t>()).c_str(),
                copies ? 15 : 0, copy.c_str(), r["files"].size());
  }
  print_mtp_footprint(j["per_rank"]);
  std::printf("\nfiles each host needs (besides config.json, manifest.json and the tokenizer files):\n");
  for (const auto& [host, files] : files_by_host) {
    std::printf("  %s:", host.c_str());
    for (const auto& f : files) std::printf(" %s", f.c_str());
    std::printf("\n");
  }
  return 0;
}

}  // namespace trillion::app
