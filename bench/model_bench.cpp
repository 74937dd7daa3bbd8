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
//               [--json FILE]
// --floor also times every matrix of a batch-1 step alone (one pool matmul
// each), interleaved with the batch-1 steps: the step's time over that sum is
// what the model adds to (or saves on) its kernels. --phases also times each
// step by phase (model/phase_times.hpp): where a step's time goes.
// --read-probe also reads a large array after every other decode step (the read
// probe, bench/alternate_read.hpp): whether a step streams at what the memory
// system gives at its moment.
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

#include <sys/resource.h>

#include <nlohmann/json.hpp>

#include "common/allocator.hpp"
#include "common/thread_pool.hpp"
#include "alternate_read.hpp"
#include "b1_floor.hpp"
#include "bench_flags.hpp"
#include "format/mapped_pages.hpp"
#include "model/linear.hpp"
#include "model/local_experts.hpp"
#include "model/transformer.hpp"
#include "model/weights.hpp"
#include "store/manifest.hpp"
#include "store/int8_source.hpp"
#include "store/model_store.hpp"

using namespace trillion;

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// CPU seconds of the whole process (every thread): with wall time, how busy
// the pool's threads were (waits on dispatch, serial sections, imbalance).
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

LayerRange whole_model(const ModelConfig& cfg) { return LayerRange{0, cfg.num_hidden_layers, true, true}; }

int64_t vec_bytes(const VecView& v) { return v.size * (v.dtype == DType::BF16 ? 2 : 4); }
int64_t mlp_bytes(const MlpWeights& m) { return qmatrix_bytes(m.gate) + qmatrix_bytes(m.up) + qmatrix_bytes(m.down); }
int64_t mlp_macs(const MlpWeights& m) { return 3 * m.gate.rows * m.gate.cols; }

// What one step costs, apart from the routed experts and the attention over
// the cache (which depend on the step's tokens).
struct Costs {
  int64_t fixed_bytes = 0;  // every non-routed matrix and norm, once per step (no lm_head)
  int64_t fixed_macs = 0;   // their multiply-adds per token
  int64_t head_bytes = 0;   // final norm + lm_head, per step that asks for logits
  int64_t head_macs = 0;    // per logits row
  int64_t embed_row_bytes = 0;
  std::vector<int64_t> expert_bytes;  // [layer] one routed expert's bytes (0: dense layer)
  int64_t expert_macs = 0;            // one routed expert's multiply-adds per token
};

Costs measure_costs(const ModelConfig& cfg, TensorSource& src) {
  const ModelWeights w = ModelWeights::load(cfg, whole_model(cfg), src);
  Costs c;
  auto linear = [&](const QMatrix& m) {
    c.fixed_bytes += qmatrix_bytes(m);
    c.fixed_macs += m.rows * m.cols;
  };
  for (const LayerWeights& L : w.layers) {
    c.fixed_bytes += vec_bytes(L.input_norm) + vec_bytes(L.post_attn_norm);
    const AttentionWeights& a = L.attn;
    if (a.has_q_lora) {
      linear(a.q_a);
      linear(a.q_b);
      c.fixed_bytes += vec_bytes(a.q_a_norm);
    } else {
      linear(a.q);
    }
    linear(a.kv_a);
    linear(a.o);
    c.fixed_bytes += qmatrix_bytes(a.kv_b) + vec_bytes(a.kv_a_norm);
    // kv_b per head: W_UK^T q_nope (nope x r) and W_UV ctx (v x r); counted with attention.
    if (L.is_moe) {
      linear(L.moe.gate);
      c.fixed_bytes += vec_bytes(L.moe.bias);
      if (L.moe.has_shared) {
        c.fixed_bytes += mlp_bytes(L.moe.shared);
        c.fixed_macs += mlp_macs(L.moe.shared);
      }
      const MlpWeights e = load_expert(cfg, src, L.layer, 0);  // every expert of a layer has one format
      c.expert_bytes.push_back(mlp_bytes(e));
      c.expert_macs = mlp_macs(e);
    } else {
      c.fixed_bytes += mlp_bytes(L.mlp);
      c.fixed_macs += mlp_macs(L.mlp);
      c.expert_bytes.push_back(0);
    }
  }
  c.head_bytes = qmatrix_bytes(w.lm_head) + vec_bytes(w.final_norm);
  c.head_macs = w.lm_head.rows * w.lm_head.cols;
  c.embed_row_bytes = qmatrix_bytes(w.embed) / std::max<int64_t>(1, w.embed.rows);
  return c;
}

// Passes requests through, counting per step the distinct experts each MoE
// layer runs (their weights stream once per step), the (token, expert) pairs
// (their FLOP) and the time spent inside the backend.
class CountingExperts : public ExpertBackend {
 public:
  CountingExperts(ExpertBackend& inner, const Costs& costs) : inner_(inner), costs_(costs) {}
  void run(const ExpertRequest& req) override {
    const auto t0 = Clock::now();
    inner_.run(req);
    seconds += since(t0);
    std::vector<int32_t> ids(req.ids, req.ids + req.n * req.top_k);
    std::sort(ids.begin(), ids.end());
    const int64_t distinct = std::unique(ids.begin(), ids.end()) - ids.begin();
    bytes += distinct * costs_.expert_bytes[size_t(req.layer)];
    macs += req.n * req.top_k * costs_.expert_macs;
    experts += distinct;
  }
  void reset() { bytes = macs = experts = 0, seconds = 0; }
  int64_t bytes = 0, macs = 0, experts = 0;
  double seconds = 0;

 private:
  ExpertBackend& inner_;
  const Costs& costs_;
};

// One timed step's figures.
struct StepStats {
  double seconds = 0, expert_seconds = 0, head_seconds = 0, cpu_seconds = 0;
  int64_t tokens = 0, weight_bytes = 0, macs = 0, distinct_experts = 0;
  std::array<double, size_t(Phase::count)> phase_seconds{};  // with --phases
};

class Bench {
 public:
  Bench(const ModelConfig& cfg, TensorSource& src, ThreadPool& pool, Activations act)
      : cfg_(cfg), costs_(measure_costs(cfg, src)),
        local_(cfg, whole_model(cfg), src, pool, act), counting_(local_, costs_),
        model_(cfg, whole_model(cfg), src, pool, &counting_, act) {}

  const Costs& costs() const { return costs_; }
  void time_phases() { model_.time_phases(&phases_); }

  // Runs `batch` with tokens[n]; logits (and the greedy next token, written to
  // next[i]) for the rows listed in `head_rows`.
  StepStats step(const Batch& batch, const std::vector<int32_t>& tokens, KvCache& cache,
                 const std::vector<int64_t>& head_rows, std::vector<int32_t>* next) {
    const int64_t n = batch.size(), d = cfg_.hidden_size, V = cfg_.vocab_size, m = int64_t(head_rows.size());
    x_.resize(size_t(n * d));
    counting_.reset();
    phases_.reset();
    const double cpu0 = cpu_seconds();
    const auto t0 = Clock::now();
    model_.embed(tokens.data(), n, x_.data());
    model_.forward(batch, x_.data(), cache);
    const auto th = Clock::now();
    rows_.resize(size_t(m * d));
    for (int64_t i = 0; i < m; ++i) std::copy_n(&x_[size_t(head_rows[size_t(i)] * d)], d, &rows_[size_t(i * d)]);
    logits_.resize(size_t(m * V));
    if (m) model_.logits(rows_.data(), m, logits_.data());
    StepStats s;
    s.seconds = since(t0);
    s.head_seconds = since(th);
    s.cpu_seconds = cpu_seconds() - cpu0;
    if (next) {
      next->resize(size_t(m));
      for (int64_t i = 0; i < m; ++i) {
        const float* l = &logits_[size_t(i * V)];
        (*next)[size_t(i)] = int32_t(std::max_element(l, l + V) - l);
      }
    }
    s.expert_seconds = counting_.seconds;
    for (size_t i = 0; i < s.phase_seconds.size(); ++i) s.phase_seconds[i] = phases_.seconds(Phase(i));
    s.tokens = n;
    s.distinct_experts = counting_.experts;
    s.weight_bytes = costs_.fixed_bytes + counting_.bytes + (m ? costs_.head_bytes : 0) + n * costs_.embed_row_bytes;
    // Attention over the cache, per row, head and cached position: q_lat . c_kv
    // (r) + q_pe . k_pe (rope) + p c_kv (r); per row and head W_UK^T and W_UV.
    const int64_t H = cfg_.num_attention_heads, r = cfg_.kv_lora_rank, rope = cfg_.qk_rope_head_dim;
    int64_t attn = 0;
    for (const TokenRow& row : batch.rows)
      attn += H * ((int64_t(row.pos) + 1) * (2 * r + rope) + (cfg_.qk_nope_head_dim + cfg_.v_head_dim) * r);
    s.macs = n * costs_.fixed_macs + counting_.macs + m * costs_.head_macs + cfg_.num_hidden_layers * attn;
    return s;
  }

 private:
  const ModelConfig& cfg_;
  Costs costs_;
  LocalExperts local_;
  CountingExperts counting_;
  Transformer model_;
  PhaseTimes phases_;
  std::vector<float> x_, rows_, logits_;
};

// Deterministic prompt tokens (any ids work on random weights).
int32_t token_of(int64_t seq, int64_t pos, int64_t vocab) { return int32_t((seq * 7919 + pos * 104729 + 1) % vocab); }

// `seqs` prompts of `len` tokens each in one step: the rows, their tokens, and
// the last row of each sequence (whose logits the engine would sample).
struct Prompts {
  Batch batch;
  std::vector<int32_t> tokens;
  std::vector<int64_t> heads;
};

Prompts prompts(int64_t seqs, int64_t len, int64_t vocab) {
  Prompts p;
  for (int64_t s = 0; s < seqs; ++s) {
    for (int64_t pos = 0; pos < len; ++pos) {
      p.batch.rows.push_back({int32_t(s), int32_t(pos)});
      p.tokens.push_back(token_of(s, pos, vocab));
    }
    p.heads.push_back(int64_t(p.batch.rows.size()) - 1);
  }
  return p;
}

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
  std::string model_dir, json_path, batches_arg = "1,4,16,64", activations = "auto";
  bool with_floor = false, with_phases = false, with_reads = false;
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
    else {
      std::fprintf(stderr, "usage: bench_model --model DIR [--threads N] [--prefill-seqs S] [--prefill-len P]\n"
                           "  [--context C] [--batches 1,4,16,64] [--steps N] [--reps R] [--bandwidth GBPS]\n"
                           "  [--peak GFLOPS] [--floor] [--phases] [--read-probe] [--json FILE]\n"
                           "  [--activations auto|f32|int8]\n"
                           "--floor: also time each matrix of a batch-1 step alone (the kernels' floor)\n"
                           "--phases: also time each step by phase (attention projections, W_UK/W_UV, attend,\n"
                           "  router, experts, dense mlp, head, and what none of them covers)\n"
                           "--read-probe: also read a 256 MiB array after every other decode step (each step's\n"
                           "  GB/s against what a plain reader got right after it)\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  if (model_dir.empty()) {
    std::fprintf(stderr, "bench_model: --model DIR is required\n");
    return 2;
  }
  const std::vector<int> batches = bench::parse_list("--batches", batches_arg);  // before anything large is loaded
  // Checksums off: hashing would stream every tensor once more at first use.
  auto store = ModelStore::open(model_dir, StoreOptions{false});
  const ModelConfig& cfg = store->config();
  ThreadPool pool(threads);
  const Activations act = resolve_activations(activations, store->manifest().weight_format);
  std::printf("compute path: %s\n", to_string(act));
  // As a run does (app/cluster.cpp): FP8 models on the int8 path read their linears as int8 groups.
  Int8FromFp8Source int8(*store, &pool);
  TensorSource& weights = requantizes_fp8(act, store->manifest().weight_format)
                              ? static_cast<TensorSource&>(int8)
                              : *store;
  Bench bench(cfg, weights, pool, act);
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
  trillion::configure_allocator();  // as trillion does (common/allocator.hpp)
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_model: %s\n", e.what());
    return 1;
  }
}
