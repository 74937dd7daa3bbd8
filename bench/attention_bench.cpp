// bench_attention: decode attention at long context (issue: integer kernels,
// item 7). One MLA layer's softmax over B sequences of `context` cached
// positions each (the absorbed form: q_lat . c_kv + q_pe . k_pe, then the
// weighted latent sum), timed for
//   chunked   the engine's kernel (model/mla_attend: all heads per cache block)
//   by-head   the previous kernel (each head streams the whole cache), kept
//             here only as the baseline of the ratio
// printing the compressed cache streamed per second against the machine's
// read bandwidth, and FLOP/s against the FMA peak (give both from
// bench_memory: --read-gbps, --peak-gflops; run_all.py does).
//
// The roofline of this step: per cached position and head, 2(r + rope) FLOP
// for the score and 2r for the weighted sum, over (r + rope) * 4 bytes read
// once: H * (4r + 2 rope) / (4 (r + rope)) FLOP per byte, 15.1 for the bench
// model's 16 heads (r 512, rope 64), 121 for DeepSeek-V3's 128. Above the
// machine's ridge (peak / bandwidth) the step is compute-bound and the share
// of bandwidth it can reach is ridge / intensity.
//
//   bench_attention [--heads 16] [--r 512] [--rope 64] [--contexts 4096,16384] [--batches 1,8]
//                   [--threads 2] [--reps 5] [--read-gbps G] [--peak-gflops F] [--json]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "common/thread_pool.hpp"
#include "config/model_config.hpp"
#include "kernels/vector_ops.hpp"
#include "model/kv_cache.hpp"
#include "model/mla_attend.hpp"

using namespace trillion;
namespace po = boost::program_options;

namespace {

std::vector<int64_t> int_list(const std::string& s) {
  std::vector<int64_t> v;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');) v.push_back(std::stoll(x));
  return v;
}

// The previous kernel: per head, per row, two passes over the row's cache.
void by_head(const MlaShape& s, const KvCache& cache, const Batch& batch, const float* q_lat, const float* q_pe,
             float* ctx, ThreadPool& pool) {
  const int64_t n = batch.size(), r = s.r, rope = s.rope, B = KvCache::kBlockTokens;
  pool.parallel_for(s.heads, 1, [&](int64_t h0, int64_t h1) {
    std::vector<float> sc;
    for (int64_t h = h0; h < h1; ++h)
      for (int64_t t = 0; t < n; ++t) {
        const TokenRow row = batch.rows[size_t(t)];
        const int64_t len = row.pos + 1;
        sc.resize(size_t(len));
        const float* ql = q_lat + (h * n + t) * r;
        const float* qp = q_pe + (t * s.heads + h) * rope;
        for (int64_t b0 = 0; b0 < len; b0 += B) {
          const float* c = cache.c_kv_block(row.slot, 0, int32_t(b0));
          const float* k = cache.k_pe_block(row.slot, 0, int32_t(b0));
          for (int64_t j = 0; j < std::min(B, len - b0); ++j)
            sc[size_t(b0 + j)] = (dot(ql, c + j * r, r) + dot(qp, k + j * rope, rope)) * s.scale;
        }
        softmax(sc.data(), len);
        float* out = ctx + (h * n + t) * r;
        std::fill_n(out, r, 0.0f);
        for (int64_t b0 = 0; b0 < len; b0 += B) {
          const float* c = cache.c_kv_block(row.slot, 0, int32_t(b0));
          for (int64_t j = 0; j < std::min(B, len - b0); ++j) axpy(sc[size_t(b0 + j)], c + j * r, out, r);
        }
      }
  });
}

template <class F>
double best_seconds(int reps, F&& f) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t heads = 16, r = 512, rope = 64;
  std::string contexts = "4096,16384", batches = "1,8";
  int threads = 2, reps = 5;
  double read_gbps = 0, peak = 0;
  bool as_json = false;
  po::options_description desc("bench_attention");
  desc.add_options()("help,h", "this help")("heads", po::value(&heads), "attention heads (bench model 16, DeepSeek-V3 128)")(
      "r", po::value(&r), "kv_lora_rank")("rope", po::value(&rope), "qk_rope_head_dim")(
      "contexts", po::value(&contexts), "cached positions per sequence")("batches", po::value(&batches), "sequences")(
      "threads", po::value(&threads), "threads")("reps", po::value(&reps), "timed repetitions (best kept)")(
      "read-gbps", po::value(&read_gbps), "the machine's read bandwidth (bench_memory)")(
      "peak-gflops", po::value(&peak), "the machine's FP32 FMA peak (bench_memory)")("json", po::bool_switch(&as_json),
                                                                                      "print JSON lines");
  po::variables_map vm;
  po::store(po::parse_command_line(argc, argv, desc), vm);
  po::notify(vm);
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  if (heads < 1 || r < 1 || rope < 2 || rope % 2 || threads < 1 || reps < 1) {
    std::fprintf(stderr, "bench_attention: --heads, --r, --threads, --reps >= 1 and an even --rope >= 2\n");
    return 2;
  }
  ModelConfig cfg;
  cfg.kv_lora_rank = r;
  cfg.qk_rope_head_dim = rope;
  cfg.num_hidden_layers = 1;
  ThreadPool pool(threads);
  const MlaShape s{heads, r, rope, float(1.0 / std::sqrt(double(128 + rope)))};
  const double intensity = double(heads) * double(4 * r + 2 * rope) / double(4 * (r + rope));
  if (!as_json) {
    std::printf("MLA decode attention: %lld heads, r %lld, rope %lld, %d thread(s); %.1f FLOP per cache byte",
                (long long)heads, (long long)r, (long long)rope, threads, intensity);
    if (read_gbps > 0 && peak > 0)
      std::printf(" (ridge %.1f: %s-bound, at most %.0f%% of bandwidth)", peak / read_gbps,
                  intensity > peak / read_gbps ? "compute" : "memory",
                  100 * std::min(1.0, peak / read_gbps / intensity));
    std::printf("\n%-8s %5s %-8s %9s %8s %7s %9s %7s %8s\n", "context", "batch", "kernel", "ms/layer", "GB/s",
                "of BW", "GFLOP/s", "of peak", "speed-up");
  }
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> U(-1.f, 1.f);
  for (const int64_t ctx_len : int_list(contexts))
    for (const int64_t B : int_list(batches)) {
      KvCache cache(cfg, LayerRange{0, 1}, int32_t(B), int32_t(ctx_len));
      Batch fill;
      for (int32_t b = 0; b < B; ++b)
        for (int32_t p = 0; p < ctx_len; p += KvCache::kBlockTokens) fill.rows.push_back({b, p});
      cache.prepare(fill);
      for (int32_t b = 0; b < B; ++b)
        for (int32_t p = 0; p < ctx_len; p += KvCache::kBlockTokens) {
          std::generate_n(cache.c_kv_block(b, 0, p), KvCache::kBlockTokens * r, [&] { return U(rng); });
          std::generate_n(cache.k_pe_block(b, 0, p), KvCache::kBlockTokens * rope, [&] { return U(rng); });
        }
      Batch step;
      for (int32_t b = 0; b < B; ++b) step.rows.push_back({b, int32_t(ctx_len - 1)});
      std::vector<float> q_lat(size_t(heads * B * r)), q_pe(size_t(B * heads * rope)), ctx(q_lat.size()),
          ctx_ref(q_lat.size());
      std::generate(q_lat.begin(), q_lat.end(), [&] { return 0.05f * U(rng); });
      std::generate(q_pe.begin(), q_pe.end(), [&] { return 0.05f * U(rng); });
      const double bytes = double(B) * double(ctx_len) * double(r + rope) * 4.0;
      const double flop = double(B) * double(ctx_len) * double(heads) * double(4 * r + 2 * rope);
      const double t_new = best_seconds(reps, [&] {
        mla_attend(s, cache, 0, step, q_lat.data(), q_pe.data(), heads * rope, rope, ctx.data(), pool);
      });
      const double t_old = best_seconds(std::max(1, reps / 2), [&] {
        by_head(s, cache, step, q_lat.data(), q_pe.data(), ctx_ref.data(), pool);
      });
      double worst = 0;  // the two kernels differ in rounding only
      for (size_t i = 0; i < ctx.size(); ++i) worst = std::max(worst, double(std::fabs(ctx[i] - ctx_ref[i])));
      for (const auto& [name, t] : {std::pair<const char*, double>{"chunked", t_new}, {"by-head", t_old}}) {
        const double gbps = bytes / t / 1e9, gflops = flop / t / 1e9;
        if (as_json) {
          std::printf("%s\n", nlohmann::json{{"context", ctx_len}, {"batch", B}, {"kernel", name}, {"heads", heads},
                                             {"seconds", t}, {"gbps", gbps}, {"gflops", gflops},
                                             {"of_bandwidth", read_gbps > 0 ? gbps / read_gbps : 0.0},
                                             {"of_peak", peak > 0 ? gflops / peak : 0.0},
                                             {"max_abs_diff", worst}}.dump().c_str());
          continue;
        }
        char bw[16] = "-", pk[16] = "-";
        if (read_gbps > 0) std::snprintf(bw, sizeof bw, "%.0f%%", 100 * gbps / read_gbps);
        if (peak > 0) std::snprintf(pk, sizeof pk, "%.0f%%", 100 * gflops / peak);
        std::printf("%-8lld %5lld %-8s %9.2f %8.2f %7s %9.1f %7s %8s\n", (long long)ctx_len, (long long)B, name,
                    t * 1e3, gbps, bw, gflops, pk, name[0] == 'c' ? (std::to_string(t_old / t_new).substr(0, 4) + "x").c_str() : "");
      }
      if (!as_json) std::printf("         (max |chunked - by-head| = %.2e)\n", worst);
    }
  return 0;
}
