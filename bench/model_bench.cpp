// bench_model: end-to-end throughput of one converted model on this rank —
// prefill tokens/s and decode tokens/s at several batch sizes — with the
// weight bytes each step touches counted exactly, so each figure comes with
// its fraction of the machine's limits (bench_memory):
//   weights streamed / step time / read bandwidth (decode: memory bound),
//   FLOP performed / step time / FMA peak (prefill: compute bound).
// A step touches every dense, attention, shared-expert, router and lm_head
// matrix once, and each routed expert chosen by at least one of its tokens
// once (seen through a counting ExpertBackend). FLOP = 2 x multiply-adds
// actually performed, attention over the cache included.
//   bench_model --model DIR [--threads 2] [--prefill-seqs 4 --prefill-len 128]
//               [--context 32] [--batches 1,4,16,64] [--steps 16] [--reps 3]
//               [--bandwidth GBPS] [--peak GFLOPS] [--floor] [--phases] [--read-probe]
//               [--json FILE] [--versus DIR [--copy-versus]]
// --floor also times every matrix of a batch-1 step alone (one pool matmul
// each), interleaved with the batch-1 steps: the step's time over that sum is
// what the model adds to (or saves on) its kernels. --phases also times each
// step by phase (model/phase_times.hpp): where a step's time goes.
// --read-probe also reads a large array after every other decode step (the read
// probe, bench/alternate_read.hpp): whether a step streams at what the memory
// system gives at its moment. --versus DIR: instead of the table, decode
// steps of the two models in turn (bench/model_versus.hpp), the ratio taken
// pair by pair; --copy-versus holds DIR's weights as an FP8 model's int8
// copy is held (bench/arena_copy.hpp).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/thread_pool.hpp"
#include "alternate_read.hpp"
#include "b1_floor.hpp"
#include "bench_flags.hpp"
#include "model_step.hpp"
#include "model_versus.hpp"
#include "format/mapped_pages.hpp"
#include "model/linear.hpp"
#include "model/transformer.hpp"
#include "platform/allocator.hpp"
#include "store/manifest.hpp"
#include "store/model_store.hpp"

using namespace trillion;

namespace {

using bench::Bench, bench::Clock, bench::Prompts, bench::StepStats, bench::prompts, bench::since, bench::whole_model;

struct Limits {
  double gbps = 0, gflops = 0;  // 0: unknown, fractions left out
};

// phases: the steps were timed by phase (--phases).
nlohmann::json summarize(const std::vector<StepStats>& steps, const Limits& lim, int threads, bool phases) {
  // Median step by time: robust to the odd step slowed by other jobs on the machine.
  std::vector<StepStats> s = steps;
  std::sort(s.begin(), s.end(), [](const StepStats& a, const StepStats& b) { return a.seconds < b.seconds; });
  const StepStats& med = s[s.size() / 2];
  double total_s = 0, total_bytes = 0;
  int64_t total_tokens = 0;
  for (const StepStats& x : steps) total_s += x.seconds, total_bytes += double(x.weight_bytes), total_tokens += x.tokens;
  nlohmann::json j;
  j["steps"] = steps.size();
  j["tokens_per_step"] = med.tokens;
  j["step_ms_median"] = med.seconds * 1e3;
  j["step_ms_best"] = s.front().seconds * 1e3;
  j["tokens_per_s"] = double(med.tokens) / med.seconds;
  j["tokens_per_s_mean"] = double(total_tokens) / total_s;
  j["weight_bytes_per_step"] = total_bytes / double(steps.size());
  j["distinct_experts_per_step"] = med.distinct_experts;
  const double gbps = double(med.weight_bytes) / med.seconds / 1e9, gflops = 2.0 * double(med.macs) / med.seconds / 1e9;
  j["weight_gbps"] = gbps;
  j["gflops"] = gflops;
  // The backend's part of the step time: the routed experts, and the shared
  // expert where LocalExperts runs it with them (experts one per thread).
  j["expert_share"] = med.expert_seconds / med.seconds;
  j["head_share"] = med.head_seconds / med.seconds;      // final norm + lm_head + argmax
  j["cpu_busy"] = med.cpu_seconds / (med.seconds * threads);  // 1: every thread busy the whole step
  if (phases) {
    // Means over the steps (a median step's phases need not add up to it).
    for (size_t i = 0; i < size_t(Phase::count); ++i) {
      double sum = 0;
      for (const StepStats& x : steps) sum += x.phase_seconds[i];
      j["phases_ms"][phase_name(Phase(i))] = sum / double(steps.size()) * 1e3;
    }
    j["step_ms_mean"] = total_s / double(steps.size()) * 1e3;
  }
  if (lim.gbps > 0) j["bandwidth_fraction"] = gbps / lim.gbps;
  if (lim.gflops > 0) j["peak_fraction"] = gflops / lim.gflops;
  return j;
}

std::string frac(const nlohmann::json& j, const char* key) {
  if (!j.contains(key)) return "-";
  char b[32];
  std::snprintf(b, sizeof b, "%.0f%%", 100.0 * j[key].get<double>());
  return b;
}

void print_row(const std::string& what, const nlohmann::json& j) {
  std::printf("%-14s %9.1f %9.2f %9.1f %6s %9.1f %6s %7.0f%% %6.0f%% %6.0f%%\n", what.c_str(),
              j["tokens_per_s"].get<double>(),
              j["weight_bytes_per_step"].get<double>() / 1e6, j["weight_gbps"].get<double>(),
              frac(j, "bandwidth_fraction").c_str(), j["gflops"].get<double>(), frac(j, "peak_fraction").c_str(),
              100 * j["expert_share"].get<double>(), 100 * j["head_share"].get<double>(),
              100 * j["cpu_busy"].get<double>());
  std::fflush(stdout);
}

// A step's mean time by phase (--phases), and what no phase covers.
void print_phases(const nlohmann::json& j) {
  double covered = 0;
  std::printf("  ms a step by phase (mean of %d):", j["steps"].get<int>());
  for (int i = 0; i < int(Phase::count); ++i) {  // in the step's order (JSON keeps its keys sorted)
    const double ms = j["phases_ms"][phase_name(Phase(i))].get<double>();
    std::printf(" %s %.3f,", phase_name(Phase(i)), ms);
    covered += ms;
  }
  const double all = j["step_ms_mean"].get<double>();
  std::printf(" other %.3f (of %.3f)\n", all - covered, all);
  std::fflush(stdout);
}

}  // namespace

int run(int argc, char** argv) {
  using bench::whole_at_least, bench::positive_number;
  std::string model_dir, versus_dir, json_path, batches_arg = "1,4,16,64", activations = "auto";
  bool with_floor = false, with_phases = false, with_reads = false, copy_versus = false;
  int threads = 0, prefill_seqs = 4, prefill_len = 128, context = 32, steps = 16, reps = 3;
  Limits lim;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--model") model_dir = next();
    else if (a == "--threads") threads = whole_at_least(a, next(), 0);
    else if (a == "--prefill-seqs") prefill_seqs = whole_at_least(a, next(), 0);
    else if (a == "--prefill-len") prefill_len = whole_at_least(a, next(), 1);
    else if (a == "--context") context = whole_at_least(a, next(), 1);
    else if (a == "--batches") batches_arg = next();
    else if (a == "--steps") steps = whole_at_least(a, next(), 1);
    else if (a == "--reps") reps = whole_at_least(a, next(), 1);
    else if (a == "--bandwidth") lim.gbps = positive_number(a, next());
    else if (a == "--peak") lim.gflops = positive_number(a, next());
    else if (a == "--json") json_path = next();
    else if (a == "--activations") activations = next();
    else if (a == "--floor") with_floor = true;
    else if (a == "--phases") with_phases = true;
    else if (a == "--read-probe") with_reads = true;
    else if (a == "--versus") versus_dir = next();
    else if (a == "--copy-versus") copy_versus = true;
    else {
      std::fprintf(stderr, "usage: bench_model --model DIR [--threads N] [--prefill-seqs S] [--prefill-len P]\n"
                           "  [--context C] [--batches 1,4,16,64] [--steps N] [--reps R] [--bandwidth GBPS]\n"
                           "  [--peak GFLOPS] [--floor] [--phases] [--read-probe] [--json FILE]\n"
                           "  [--activations auto|f32|int8|bf16] [--versus DIR [--copy-versus]]\n"
                           "--floor: also time each matrix of a batch-1 step alone (the kernels' floor)\n"
                           "--phases: also time each step by phase (attention projections, W_UK/W_UV, attend,\n"
                           "  router, experts, dense mlp, head, and what none of them covers)\n"
                           "--read-probe: also read a 256 MiB array after every other decode step (each step's\n"
                           "  GB/s against what a plain reader got right after it)\n"
                           "--versus DIR: instead of the table, decode steps of --model and DIR in turn at each\n"
                           "  batch: each model's tokens/s and the first's over the second's, pair by pair\n"
                           "--copy-versus: the --versus model's weights copied into anonymous memory at load, where\n"
                           "  an FP8 model's int8 copy lives (with DIR = --model's: what placement alone costs)\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  if (model_dir.empty()) {
    std::fprintf(stderr, "bench_model: --model DIR is required\n");
    return 2;
  }
  const std::vector<int> batches = bench::parse_list("--batches", batches_arg);  // before anything large is loaded
  if (!versus_dir.empty()) ModelStore::open(versus_dir, StoreOptions{false});  // a wrong DIR fails before any load
  ThreadPool pool(threads);
  bench::LoadedModel loaded(model_dir, pool, activations);
  const ModelConfig& cfg = loaded.config();
  const Activations act = loaded.act;
  TensorSource& weights = *loaded.weights;
  Bench& bench = *loaded.bench;
  std::printf("compute path: %s\n", to_string(act));
  if (!versus_dir.empty()) {
    bench::LoadedModel other(versus_dir, pool, activations, copy_versus);
    if (with_phases) bench.time_phases(), other.bench->time_phases();
    std::printf("A %s, B %s%s (compute path %s), %d thread(s); decode steps in turn\n", model_dir.c_str(),
                versus_dir.c_str(), copy_versus ? " copied to anonymous memory" : "", to_string(other.act), pool.size());
    const nlohmann::json j{{"model", model_dir}, {"versus", versus_dir}, {"versus_copied", copy_versus},
                           {"threads", pool.size()},
                           {"decode", bench::decode_versus(loaded, other, batches, context, steps, with_phases)}};
    if (!json_path.empty()) std::ofstream(json_path) << j.dump(2) << "\n";
    return 0;
  }
  if (with_phases) bench.time_phases();
  std::unique_ptr<bench::FloorTimer> floor_timer;
  if (with_floor) floor_timer = std::make_unique<bench::FloorTimer>(bench::b1_floor_matrices(cfg, weights), pool, act);
  // 256 MiB: 8x this machine's last-level cache, and a read as long as a batch-1 step.
  std::unique_ptr<bench::AlternateRead> reads;
  if (with_reads) reads = std::make_unique<bench::AlternateRead>(pool, 256);
  const int64_t V = cfg.vocab_size;

  // The pool's round trip (wake the workers, wait for them) with no work: a
  // batch-1 decode step of a DeepSeek-V3-shaped model makes ~10 per layer.
  double dispatch_us = 0;
  {
    const auto t0 = Clock::now();
    const int calls = 2000;
    for (int i = 0; i < calls; ++i) pool.parallel_for(pool.size(), 1, [](int64_t, int64_t) {});
    dispatch_us = since(t0) / calls * 1e6;
  }
  nlohmann::json out;
  out["model"] = model_dir;
  out["threads"] = pool.size();
  out["dispatch_us"] = dispatch_us;
  out["fixed_weight_bytes"] = bench.costs().fixed_bytes + bench.costs().head_bytes;
  std::printf("model %s, %d thread(s); fixed weights %.1f MB/step + %.2f MB per routed expert; "
              "empty pool dispatch %.1f us\n", model_dir.c_str(), pool.size(),
              double(bench.costs().fixed_bytes + bench.costs().head_bytes) / 1e6,
              double(bench.costs().expert_bytes.back()) / 1e6, dispatch_us);
  // experts / head: share of the step in the expert backend (routed experts, with the shared one
  // where they run one per thread) / lm_head; busy: CPU time / (wall x threads).
  std::printf("%-14s %9s %9s %9s %6s %9s %6s %8s %7s %7s\n", "step", "tokens/s", "MB/step", "GB/s", "of BW", "GFLOP/s",
              "of pk", "experts", "head", "busy");

  // Prefill: prefill_seqs sequences of prefill_len tokens in one step, logits
  // of each sequence's last row (as the engine does). The first run also
  // pages in the mmap'd weights, so it is not timed. --prefill-seqs 0 skips it.
  if (prefill_seqs > 0) {
    KvCache cache(cfg, whole_model(cfg), prefill_seqs, prefill_len);
    const Prompts p = prompts(prefill_seqs, prefill_len, V);
    bench.step(p.batch, p.tokens, cache, p.heads, nullptr);
    std::vector<StepStats> runs;
    for (int r = 0; r < reps; ++r) runs.push_back(bench.step(p.batch, p.tokens, cache, p.heads, nullptr));
    nlohmann::json j = summarize(runs, lim, pool.size(), with_phases);
    j["sequences"] = prefill_seqs;
    j["prompt_len"] = prefill_len;
    out["prefill"] = j;
    print_row("prefill " + std::to_string(prefill_seqs) + "x" + std::to_string(prefill_len), j);
  }

  // Decode at each batch: prefill `context` tokens of every sequence (not
  // timed), then `steps` greedy decode steps of one token per sequence.
  out["decode"] = nlohmann::json::array();
  for (int B : batches) {
    KvCache cache(cfg, whole_model(cfg), B, context + steps + 1);
    const Prompts pre = prompts(B, context, V);
    std::vector<int32_t> next;
    bench.step(pre.batch, pre.tokens, cache, pre.heads, &next);
    std::vector<int64_t> all(static_cast<size_t>(B));
    for (int s = 0; s < B; ++s) all[size_t(s)] = s;
    std::vector<StepStats> runs;
    // The probes (--floor's passes at batch 1, --read-probe's reads) run
    // after every other step, right after the step they are compared with,
    // and the step after each is left out of the figures: they stream
    // hundreds of MB, which evicts what a step finds in cache (INT4 batch 1
    // ran ~7% slower right after a read).
    const bool probing = (floor_timer && B == 1) || reads;
    bool probed = false;  // after the step before
    for (int t = 0; t < steps; ++t) {
      Batch b;
      for (int s = 0; s < B; ++s) b.rows.push_back({s, context + t});
      const std::vector<int32_t> in = next;
      const StepStats st = bench.step(b, in, cache, all, &next);
      if (std::exchange(probed, false)) continue;
      runs.push_back(st);
      if (!probing || (t % 2 == 0 && t + 1 < steps)) continue;  // the last step is always probed
      probed = true;
      if (floor_timer && B == 1) floor_timer->pass();
      if (reads) reads->after_step(double(st.weight_bytes) / st.seconds / 1e9);
    }
    nlohmann::json j = summarize(runs, lim, pool.size(), with_phases);
    j["batch"] = B;
    j["context"] = context;
    if (reads) j["read_alternated"] = reads->take();
    out["decode"].push_back(j);
    print_row("decode b=" + std::to_string(B), j);
    if (j.contains("phases_ms")) print_phases(j);
    if (reads) {
      const nlohmann::json& r = j["read_alternated"];
      std::printf("  reads after its steps: %.1f GB/s median (%.1f-%.1f); a step's GB/s over the read after it: "
                  "%.0f%% (median of %d), correlation %.2f\n", r["read_gbps_median"].get<double>(),
                  r["read_gbps_min"].get<double>(), r["read_gbps_max"].get<double>(),
                  100 * r["step_over_read_median"].get<double>(), r["reads"].get<int>(),
                  r["step_read_correlation"].get<double>());
      std::fflush(stdout);
    }
  }
  if (floor_timer) {
    if (std::find(batches.begin(), batches.end(), 1) == batches.end())  // no steps to interleave with
      for (int r = 0; r < std::max(3, reps); ++r) floor_timer->pass();
    const nlohmann::json j = floor_timer->json();
    out["b1_floor"] = j;
    std::printf("batch-1 kernel floor: %zu matmuls at n=1, %.1f ms:", size_t(j["matmuls"]), j["ms"].get<double>());
    for (const auto& [part, ms] : j["parts_ms"].items()) std::printf(" %s %.2f", part.c_str(), ms.get<double>());
    std::printf("\n  GB/s by part:");
    for (const auto& [part, ms] : j["parts_ms"].items())
      std::printf(" %s %.1f (%.1f MB)", part.c_str(), j["parts_mb"][part].get<double>() / std::max(1e-9, ms.get<double>()),
                  j["parts_mb"][part].get<double>());
    std::printf("\n");
    for (const auto& d : out["decode"])
      if (d["batch"] == 1)
        std::printf("decode b=1 step %.1f ms = %.2f x the floor (passes interleaved with the steps)\n",
                    d["step_ms_median"].get<double>(), d["step_ms_median"].get<double>() / j["ms"].get<double>());
  }
  // Of the mapped shards, what the steps left resident and how much of it sits
  // on 2 MiB pages (MappedFile::advise_huge_pages): batch-1 decode on the Zen 5
  // VM ran 1.1-1.4x faster with them, and a page cache filled before the advice
  // (or TRILLION_HUGE_PAGES=0, or no THP) keeps 4 KiB pages.
  const MappedPages pages = mapped_pages(".h5");
  out["weights_resident_mb"] = double(pages.resident_bytes) / 1e6;
  out["weights_huge_mb"] = double(pages.huge_bytes) / 1e6;
  if (pages.mappings > 0)
    std::printf("mapped weights: %.0f MB resident, %.0f MB (%.0f%%) on 2 MiB pages\n", pages.resident_bytes / 1e6,
                pages.huge_bytes / 1e6,
                100.0 * double(pages.huge_bytes) / double(std::max<int64_t>(1, pages.resident_bytes)));
  if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
  return 0;
}

int main(int argc, char** argv) {
  trillion::platform::configure_allocator();  // as trillion does (platform/allocator.hpp)
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_model: %s\n", e.what());
    return 1;
  }
}
