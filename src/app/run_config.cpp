#include "app/run_config.hpp"

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

#include "common/error.hpp"
#include "common/thread_pool.hpp"
#include "kernels/matmul_bf16.hpp"
#include "parallel/mode_rules.hpp"
#include "parallel/run_footprint.hpp"
#include "plan/model_cost.hpp"
#include "plan/predict.hpp"
#include "plan/profile.hpp"
#include "store/manifest.hpp"

namespace trillion::app {

namespace {

// --stages auto: `trillion plan`'s split (plan/predict.hpp, auto_stages).
// Every rank computes it from the same inputs (the model, the flags, the
// profile), so all agree.
StagePlan auto_stages_of(const RunOptions& o, const ModelConfig& cfg, const Manifest& man, Activations act,
                         const RunShape& shape, int ranks) {
  HostProfile host = default_host_profile();
  if (!o.profile.empty()) {
    ProfileFile p = read_profile(o.profile);
    if (!p.has_host) throw InputError("--profile " + o.profile + ": no \"host\" in it");
    host = p.host;
  }
  return auto_stages(model_cost(cfg, man, act), host, o.threads, ranks, shape.slots, shape.micro_batches,
                     shape.max_len);
}

// --max-len against the model, and --speculative against what it holds.
RunShape shape_of(const RunOptions& o, const ModelStore& store, Activations act) {
  const ModelConfig& cfg = store.config();
  const int64_t max_len = o.max_len > 0 ? o.max_len : std::min<int64_t>(cfg.max_position_embeddings, 4096);
  if (max_len > cfg.max_position_embeddings)
    throw InputError("--max-len " + std::to_string(max_len) + " exceeds the model's max_position_embeddings (" +
                     std::to_string(cfg.max_position_embeddings) + ")");
  RunShape shape{o.max_batch, int32_t(max_len), o.micro_batches, o.kv_cache_tokens, o.step_tokens, act};
  if (!o.speculative.empty()) {
    if (o.speculative != "mtp")
      throw InputError("--speculative must be mtp (the model's multi-token-prediction layer), not \"" + o.speculative +
                       "\"");
    if (cfg.num_nextn_predict_layers < 1 || !has_mtp_layer(cfg, store.manifest()))
      throw InputError("--speculative mtp: " + o.model_dir + " has no MTP layer (config.json num_nextn_predict_layers is " +
                       std::to_string(cfg.num_nextn_predict_layers) + ", and the converted model must hold model.layers." +
                       std::to_string(cfg.num_hidden_layers) + ".*)");
    shape.speculative = true;
  }
  return shape;
}

// The int8 copy does not fit beside the rest: --activations auto says so in
// its notice in fewer words (`reason`) than the error of an explicit int8.
struct Int8CopyMisfit : InputError {
  Int8CopyMisfit(const std::string& what, std::string why) : InputError(what), reason(std::move(why)) {}
  std::string reason;
};

std::string gb(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GB", bytes / 1e9);
  return buf;
}

// The memory this rank may use: its part of the host's, less FP8's int8
// copy of its linears on the int8 path (anonymous memory, unlike the mapped
// FP8 pages).
double memory_for_run(const ModelStore& store, const RunConfig& rc, const RankPlace& place) {
  double memory = place.host_memory_bytes / std::max(1, place.ranks_on_host);
  if (!requantizes_fp8(rc.shape.activations, store.manifest().weight_format)) return memory;
  const RankShare& mine = rc.layout.ranks.at(size_t(place.rank));
  const double copy = double(share_int8_copy_bytes(store.config(), store.manifest(), mine) +
                             (rc.shape.speculative ? share_mtp_int8_copy_bytes(store.config(), store.manifest(), mine) : 0));
  if (memory > 0 && copy >= memory)
    throw Int8CopyMisfit("--activations int8 on FP8 weights: this rank's int8 copy of its linears needs " + gb(copy) +
                             ", more than the " + gb(memory) +
                             " of memory it has (--activations f32 or bf16 read the FP8 weights in place)",
                         "the int8 copy of its FP8 linears needs " + gb(copy) + ", more than its " + gb(memory));
  return memory > 0 ? memory - copy : memory;
}

}  // namespace

void check_run_flags(const RunOptions& o) {
  if (o.max_batch < 1) throw InputError("--max-batch must be at least 1");
  if (o.step_tokens < 1) throw InputError("--step-tokens must be at least 1");
  if (o.threads < 0) throw InputError("--threads must be >= 0");
  if (o.threads > thread_limit())  // before any thread starts (pid_max is finite)
    throw InputError("--threads " + std::to_string(o.threads) + " exceeds the limit of " +
                     std::to_string(thread_limit()) + " threads per rank (8 per hardware thread, at most " +
                     std::to_string(kMaxThreads) + ")");
  if (o.micro_batches < 0) throw InputError("--micro-batches must be >= 0");
  if (o.kv_cache_tokens < 0) throw InputError("--kv-cache-tokens must be >= 0");
  if (o.metrics_interval < 0) throw InputError("--metrics-interval must be >= 0");
  parse_parallel_mode(o.parallel);
  if (o.activations != "auto") parse_activations(o.activations);  // a bad flag before the model opens
}

RunConfig configure_run(RunOptions& o, const ModelStore& store, const RankPlace& place) {
  const ModelConfig& cfg = store.config();
  RunConfig rc;
  const ParallelMode mode = parse_parallel_mode(o.parallel);
  const WeightFormat format = store.manifest().weight_format;
  // One rank alone decides auto on FP8 from its own facts; Cluster::set_up
  // has the ranks agree first and passes the path they chose.
  const Activations act = auto_weighs_hosts(o.activations, format)
                              ? auto_activations(format, int8_copy_misfit(o, store, place).empty(), bf16_auto_faster())
                              : resolve_activations(o.activations, format, false, false);
  o.activations = to_string(act);  // as --metrics reports it
  rc.shape = shape_of(o, store, act);
  // MTP drafts from the whole head on the last stage: auto does not split it there.
  rc.layout = resolve_layout(cfg, model_sizes(cfg, store.manifest()), mode, place.ranks, o.stages, o.head_split,
                             rc.shape.speculative,
                             [&] { return auto_stages_of(o, cfg, store.manifest(), act, rc.shape, place.ranks); })
                  .layout;
  check_mode_shape(rc.layout, rc.shape);
  if (o.micro_batches > o.max_batch)
    throw InputError("--micro-batches " + std::to_string(o.micro_batches) + " exceeds --max-batch " +
                     std::to_string(o.max_batch) + " (a micro-batch holds at least one sequence)");
  // The KV cache and activations, against this rank's share of the host's
  // memory, before the role allocates them; the MTP layer's KV cache is one
  // layer more where the head is.
  const LayerRange& held = rc.layout.ranks.at(size_t(place.rank)).layers;
  check_run_memory(cfg, rc.shape, held.size() + (rc.shape.speculative && held.has_head ? 1 : 0),
                   pool_slots(rc.layout, rc.shape.slots), memory_for_run(store, rc, place));
  // Ranks sharing a host share its cores: by default each takes its part of
  // the physical cores; spinning for work only pays when no thread competes
  // for a core (ThreadPool).
  const int on_host = std::max(1, place.ranks_on_host);
  rc.threads = o.threads > 0 ? o.threads : std::clamp(place.physical_cores / on_host, 1, place.thread_limit);
  rc.cores_to_spare = int64_t(rc.threads) * on_host <= int64_t(std::max(1, place.hardware_threads));
  return rc;
}

std::string int8_copy_misfit(const RunOptions& o, const ModelStore& store, const RankPlace& place) {
  RunOptions int8 = o;
  int8.activations = "int8";
  try {
    configure_run(int8, store, place);  // the layout for int8 (auto stages weigh the path), then memory
    return "";
  } catch (const Int8CopyMisfit& e) {
    return e.reason;
  } catch (const InputError& e) {
    return std::string("with the int8 copy of its FP8 linears: ") + e.what();
  }
}

std::string auto_activations_notice(Activations chosen, const std::string& int8_misfit, const std::string& bf16_slow) {
  std::string why;
  if (chosen == Activations::bf16) {
    why = "every rank's CPU has BF16 dot products faster than the f32 path; no int8 copy of the FP8 linears";
  } else {
    why = bf16_slow + " has no BF16 dot products faster than the f32 path; ";
    why += chosen == Activations::int8 ? "the int8 copy of the FP8 linears fits every rank's memory" : int8_misfit;
  }
  return std::string("activations auto: ") + to_string(chosen) + " (" + why + ")";
}

}  // namespace trillion::app
