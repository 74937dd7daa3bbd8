// trillion plan (--model DIR | --config FILE|HF_DIR [--quantize FMT]) (--ranks N | --hostfile FILE)
//   [--parallel pipeline|expert] [--host-memory 192G[,..]] [--profile HOST.json] [--link-profile LINK.json]
//   [--batch 1,8,32,128] [--micro-batches K] [--context N] [--json] ...
// Which rank holds which layers and experts, the memory each host needs
// against what it has (weights, int8 copy, KV cache, working memory), the
// shard files each host needs, and predicted tokens/s in both modes
// (plan/predict.hpp) from the host and link profiles.
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/commands.hpp"
#include "app/plan_inputs.hpp"
#include "app/plan_report.hpp"
#include "app/plan_mtp.hpp"
#include "app/run_options.hpp"
#include "common/error.hpp"
#include "model/kv_cache.hpp"
#include "model/kv_pools.hpp"
#include "config/activations.hpp"
#include "parallel/mode_rules.hpp"
#include "parallel/run_footprint.hpp"
#include "plan/layout.hpp"

namespace po = boost::program_options;

namespace trillion::app {

namespace {

// Each rank's share and each host's memory need on one compute path.
struct PlanMemory {
  RunLayout run;
  nlohmann::json per_rank = nlohmann::json::array(), per_host = nlohmann::json::array();
  bool fits = true;
  std::string first_shortfall;  // the first host that falls short, in words ("" when all fit)
};

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / double(1ll << 30));
  return buf;
}

void fill_memory(PlanMemory& pm, const ModelConfig& cfg, const Manifest& man, const RunShape& shape,
                 const PlanHosts& hosts, const std::vector<int64_t>& memory, bool copies) {
  const Layout& layout = pm.run.layout;
  std::vector<double> host_need(memory.size(), 0);
  for (size_t r = 0; r < layout.ranks.size(); ++r) {
    const RankShare& s = layout.ranks[r];
    const int32_t slots = pool_slots(layout, shape.slots);
    const RunFootprint f = run_footprint(cfg, shape, s.layers.size(), slots);
    // The pool as the run allocates it (KvPools::pool_blocks over the rank's layers).
    const int64_t kv =
        KvCache::pool_bytes(cfg, s.layers.size(), KvPools::pool_blocks(slots, shape.max_len, shape.kv_tokens));
    const int64_t weights = share_bytes(cfg, man, s);
    const int64_t copy = copies ? share_int8_copy_bytes(cfg, man, s) : 0;
    const int h = hosts.host_of_rank[r];
    host_need[size_t(h)] += double(weights + copy + kv) + f.activation_bytes;
    pm.per_rank.push_back({{"rank", r},
                           {"host", hosts.host_names[size_t(h)]},
                           {"layers", {s.layers.begin, s.layers.end - 1}},
                           {"embed", s.layers.has_embed},
                           {"head", s.layers.has_head},
                           {"head_rows", {s.layers.head_begin(), s.layers.head_end(cfg.vocab_size)}},
                           {"experts", {s.experts.begin, s.experts.end - 1}},
                           {"weight_bytes", weights},
                           {"int8_copy_bytes", copy},
                           {"kv_cache_bytes", kv},
                           {"working_bytes", int64_t(f.activation_bytes)},
                           {"mtp", mtp_footprint(cfg, man, s, kv / std::max<int64_t>(1, s.layers.size()))},
                           {"files", share_files(cfg, man, s)}});
  }
  for (size_t h = 0; h < memory.size(); ++h) {
    const double short_by = host_need[h] - double(memory[h]);
    if (short_by > 0 && pm.fits)
      pm.first_shortfall =
          hosts.host_names[h] + " needs " + gib(host_need[h]) + ", more than its " + gib(double(memory[h]));
    if (short_by > 0) pm.fits = false;
    std::set<std::string> files;
    for (const auto& r : pm.per_rank)
      if (r["host"] == hosts.host_names[h])
        for (const auto& f : r["files"]) files.insert(f.get<std::string>());
    pm.per_host.push_back({{"host", hosts.host_names[h]},
                           {"memory_bytes", memory[h]},
                           {"needed_bytes", int64_t(host_need[h])},
                           {"fits", short_by <= 0},
                           {"shortfall_bytes", short_by > 0 ? int64_t(short_by) : 0},
                           {"files", files}});
  }
}

// Whether the host profile runs FP8 on bf16 faster than on f32, as
// bf16_auto_faster() answers for a run: by the in-cache kernel rates at
// batch 32 (a batch job's decode, where compute starts to count).
struct Bf16Verdict {
  bool faster = false;
  std::string why;
};
Bf16Verdict bf16_verdict(const HostProfile& host) {
  if (!host.kernels.count("fp8/bf16")) return {false, "the host profile has no fp8/bf16 kernel rate"};
  const double bf16 = host.kernel_rate("fp8/bf16", 32);
  if (!host.kernels.count("fp8/f32"))
    return {true, "the host profile has an fp8/bf16 kernel rate and no fp8/f32 one"};
  const double f32 = host.kernel_rate("fp8/f32", 32);
  char buf[160];
  std::snprintf(buf, sizeof buf, "the host profile's fp8/bf16 rate at batch 32 (%.2f GFLOP/s per core) %s fp8/f32's (%.2f)",
                bf16 / 1e9, bf16 > f32 ? "exceeds" : "does not exceed", f32 / 1e9);
  return {bf16 > f32, buf};
}

}  // namespace

int run_plan(const Args& args) {
  std::string model_dir, config, quantize, hostfile, parallel = "pipeline", stages, activations = "auto",
              head_split_flag;
  std::string host_memory, profile_path, link_path, batches = "1,8,32,128";
  int ranks = 0, ranks_per_host = 0, kv_slots = 8, kv_len = 4096, threads = 0, micro_batches = 0;
  int64_t kv_tokens = 0, context = -1, step_tokens = 256;
  bool as_json = false, emulated = false;
  po::options_description desc("options");
  desc.add_options()
      ("model", po::value(&model_dir), "converted model directory")
      ("config", po::value(&config), "a config.json (or a Hugging Face directory holding one): plan before converting")
      ("quantize", po::value(&quantize), "with --config: as after convert --quantize int8|int4|fp8 (a bf16 checkpoint; an fp8 one: int8)")
      ("ranks,n", po::value(&ranks), "number of ranks (default: the hostfile's slots)")
      ("hostfile", po::value(&hostfile), "Open MPI hostfile: name the host of each rank")
      ("ranks-per-host", po::value(&ranks_per_host)->default_value(0),
       "without a hostfile: ranks on each host (0: all on one, or one each with --link-profile)")
      ("host-memory", po::value(&host_memory), "memory of each host: one value (192G) or one per host (192G,512G); "
                                               "default: the host profile's")
      ("parallel", po::value(&parallel)->default_value("pipeline"), "pipeline | expert (the layout shown)")
      ("stages", po::value(&stages),
       "pipeline layer ranges per rank, e.g. 0-14,15-30, or auto: balanced by predicted time at --max-batch "
       "(default: balanced by bytes)")
      ("head-split", po::value(&head_split_flag),
       "pipeline: lm_head rows [0, N) on the first stage, the rest on the last, as for generate; auto: as "
       "--stages auto chooses (its default)")
      ("max-batch", po::value(&kv_slots)->default_value(8), "sequence slots (KV cache and working memory)")
      ("max-len", po::value(&kv_len)->default_value(4096), "positions per slot (KV cache)")
      ("kv-cache-tokens", po::value(&kv_tokens)->default_value(0),
       "KV-cache positions per rank, as for generate (0: max-batch x max-len)")
      ("step-tokens", po::value(&step_tokens)->default_value(256), "prefill tokens per step, as for generate")
      ("activations", po::value(&activations)->default_value("auto"), "compute path, as for generate: auto | f32 | int8 | bf16")
      ("profile", po::value(&profile_path), "host profile JSON (trillion calibrate, profiles/); default: built in")
      ("link-profile", po::value(&link_path), "link profile JSON between hosts (profiles/tb5-*.json)")
      ("threads", po::value(&threads)->default_value(0), "threads per rank (0: the host's cores / its ranks)")
      ("batch", po::value(&batches)->default_value("1,8,32,128"), "decode batch sizes to predict")
      ("micro-batches", po::value(&micro_batches)->default_value(0),
       "pipeline: groups in flight (0: one per stage); expert: row groups per rank taking turns at the MoE layers (0: 2)")
      ("context", po::value(&context)->default_value(-1),
       "cached positions per sequence while decoding (default: 256, or max-len - 1 if less)")
      ("emulated", po::bool_switch(&emulated),
       "the hosts are network namespaces of this one machine (jobs/scaling-study): all ranks share the host "
       "profile's cores and bandwidth, host i pinned to core i mod cores")
      ("json", po::bool_switch(&as_json), "print JSON");
  if (!parse_args(args, "usage: trillion plan (--model DIR | --config FILE) (--ranks N | --hostfile F) [options]",
                  desc))
    return 0;
  if (threads < 0 || threads > 1024) throw InputError("--threads must be 0..1024");
  if (micro_batches < 0 || micro_batches > 4096) throw InputError("--micro-batches must be 0..4096");
  if (kv_slots < 1 || kv_slots > 65536) throw InputError("--max-batch must be 1..65536");
  if (kv_len < 1) throw InputError("--max-len must be >= 1");
  if (kv_tokens < 0) throw InputError("--kv-cache-tokens must be >= 0");
  if (context == -1) context = std::min<int64_t>(256, kv_len - 1);
  if (context < 0 || context >= kv_len) throw InputError("--context must be 0.." + std::to_string(kv_len - 1) + " (below --max-len)");
  if (step_tokens < 1 || step_tokens > 65536) throw InputError("--step-tokens must be 1..65536");

  // Profiles first: they are small and every error in them is the user's.
  HostProfile host = default_host_profile();
  LinkProfile local = default_link_profile(), link = local;
  if (!profile_path.empty()) {
    ProfileFile p = read_profile(profile_path);
    if (!p.has_host) throw InputError("--profile " + profile_path + ": no \"host\" in it");
    host = p.host;
    if (p.has_link) local = link = p.link;  // measured between ranks of that host
  }
  if (!link_path.empty()) {
    ProfileFile p = read_profile(link_path);
    if (!p.has_link) throw InputError("--link-profile " + link_path + ": no \"link\" in it");
    link = p.link;
  }
  const PlanHosts hosts = plan_hosts(hostfile, ranks, ranks_per_host, !link_path.empty());
  ranks = int(hosts.host_of_rank.size());
  std::vector<int64_t> memory(hosts.host_names.size(), host.memory_bytes);
  if (!host_memory.empty()) {
    std::vector<int64_t> given;
    size_t at = 0;
    while (at <= host_memory.size()) {
      const size_t comma = std::min(host_memory.find(',', at), host_memory.size());
      given.push_back(parse_bytes(host_memory.substr(at, comma - at), "--host-memory"));
      at = comma + 1;
    }
    if (given.size() != 1 && given.size() != memory.size())
      throw InputError("--host-memory: " + std::to_string(given.size()) + " values for " +
                       std::to_string(memory.size()) + " hosts (give one, or one per host)");
    for (size_t h = 0; h < memory.size(); ++h) memory[h] = given.size() == 1 ? given[0] : given[h];
  }
  PredictOptions popt;
  popt.batches = parse_int_list(batches, "--batch");
  popt.micro_batches = micro_batches;
  popt.context = context;
  popt.prefill_tokens = step_tokens;

  const PlanModel pm = load_plan_model(model_dir, config, quantize);
  const ModelConfig& cfg = pm.config;
  const Manifest& man = pm.manifest;
  const ParallelMode mode = parse_parallel_mode(parallel);
  const ModelSizes sizes = model_sizes(cfg, man);
  ClusterProfile cl;
  cl.host_of_rank = hosts.host_of_rank;
  cl.hosts.assign(memory.size(), host);
  cl.link = link;
  cl.local = local;
  cl.threads = threads;
  cl.one_machine = emulated;
  RunShape shape;
  shape.slots = kv_slots;
  shape.max_len = kv_len;
  shape.kv_tokens = kv_tokens;
  shape.step_tokens = step_tokens;
  shape.micro_batches = micro_batches;
  // The layout and each host's memory on path `a`, as generate would hold them.
  const auto memory_on = [&](Activations a) {
    // --stages auto: balanced by the predicted time of a decode step at
    // --max-batch (a batch job's steady state), as generate splits it.
    const ModelCost cost = model_cost(cfg, man, a);
    PlanMemory pmem;
    pmem.run = resolve_layout(cfg, sizes, mode, ranks, stages, head_split_flag, /*whole_head=*/false, [&] {
      return auto_stages(cost, host, threads, ranks, kv_slots, micro_batches, kv_len);
    });
    check_mode_shape(pmem.run.layout, shape);  // as generate refuses them
    fill_memory(pmem, cfg, man, shape, hosts, memory, requantizes_fp8(a, man.weight_format));
    return pmem;
  };
  // auto on FP8 (config/activations.hpp): bf16 where the profile's kernels
  // say it beats f32, else the int8 copy where the plan with it fits every
  // host, else f32.
  Activations act;
  std::string reason;
  std::optional<PlanMemory> int8_plan;
  if (auto_weighs_hosts(activations, man.weight_format)) {
    const Bf16Verdict bf16 = bf16_verdict(host);
    if (!bf16.faster) int8_plan = memory_on(Activations::int8);  // only then does the copy's fit matter
    act = auto_activations(man.weight_format, int8_plan && int8_plan->fits, bf16.faster);
    if (act == Activations::bf16) reason = "auto: " + bf16.why;
    else if (act == Activations::int8) reason = "auto: " + bf16.why + "; the int8 copy of the FP8 linears fits every host's memory";
    else reason = "auto: " + bf16.why + "; with the int8 copy of the FP8 linears " + int8_plan->first_shortfall;
  } else {
    act = resolve_activations(activations, man.weight_format, false, false);
    reason = activations == "auto" ? "auto: int8 for INT8 and INT4 models, f32 for BF16"
                                   : "--activations " + activations;
  }
  const PlanMemory pmem = act == Activations::int8 && int8_plan ? std::move(*int8_plan) : memory_on(act);
  const ModelCost cost = model_cost(cfg, man, act);
  stages = pmem.run.stages.stages;
  const int64_t head_split = pmem.run.stages.head_split;
  const Layout& layout = pmem.run.layout;
  const bool copies = requantizes_fp8(act, man.weight_format);

  PlanReport rep;
  rep.json = {{"model", pm.source}, {"converted", pm.converted}, {"model_type", cfg.model_type},
              {"weight_format", to_string(cfg.weight_format)}, {"parallel", to_string(mode)}, {"ranks", ranks},
              {"activations", to_string(act)}, {"activations_reason", reason}, {"threads", threads},
              {"emulated", emulated}, {"context", context}, {"host_profile", to_json(host)},
              {"link_profile", to_json(link)}, {"local_link_profile", to_json(local)}};
  if (!stages.empty() && takes_stages(mode)) rep.json["stages"] = stages;  // given, or what auto chose
  if (takes_stages(mode)) rep.json["head_split"] = head_split;
  rep.json["per_rank"] = pmem.per_rank;
  rep.json["per_host"] = pmem.per_host;
  rep.json["fits"] = pmem.fits;
  const bool fits = pmem.fits;

  // Predictions for both modes, each with its own layout (the one shown above for --parallel).
  rep.json["bytes_per_token"] = cost.bytes_per_token();
  rep.json["predictions"] = nlohmann::json::array();
  for (ParallelMode m : modes_for(cfg, ranks)) {
    const Layout lay = m == mode ? layout : make_layout(cfg, sizes, m, ranks);
    for (const Prediction& p : predict(cost, lay, cl, popt))
      rep.json["predictions"].push_back({{"mode", p.mode},
                                         {"phase", p.phase},
                                         {"batch", p.batch},
                                         {"tokens_per_s", p.tokens_per_s},
                                         {"step_seconds", p.step_seconds},
                                         {"bound", p.bound},
                                         {"memory_seconds", p.memory_seconds},
                                         {"compute_seconds", p.compute_seconds},
                                         {"link_seconds", p.link_seconds},
                                         {"group_latency_seconds", p.group_latency_seconds},
                                         {"metrics_tokens_per_s", p.metrics_tokens_per_s}});
  }
  if (as_json) {
    std::cout << rep.json.dump(2) << "\n";
    return 0;
  }
  print_plan(rep, copies);
  print_mtp_footprint(rep.json["per_rank"]);
  return fits ? 0 : 1;  // refused: the shortfall is printed above (as an input error: exit 1)
}

}  // namespace trillion::app
