// Weight-streaming rate of matmul per format: GB/s of weights read for batch 1
// (decode is bound by memory bandwidth: compare with bench_memory's read
// bandwidth) and GFLOP/s for larger batches (compute bound: compare with its
// FMA peak). Best of 5 trials. INT8xQ8 / INT4xQ8 rows are
// the integer-dot path (activations quantized to int8 in each call). With 2+ threads it also
// prints the pool's dispatch latency (an empty parallel_for, and a decode-
// sized 512 x 2048 INT8 matmul at n = 1), wall time per call.
// With `copies` > 1 each call uses the next of that many distinct matrices,
// so a small matrix (an expert's 512 x 2048) streams from memory as in a
// model step instead of being served from cache after the first call.
//   bench_matmul [rows cols] [threads] [formats, e.g. int8,fp8] [copies]
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "common/numeric.hpp"
#include "common/thread_pool.hpp"
#include "kernels/isa.hpp"
#include "kernels/matmul.hpp"
#include "kernels/matmul_bf16.hpp"
#include "kernels/matmul_q8.hpp"
#include "calibrate/kernel_probe.hpp"

using namespace trillion;

namespace {

// Mean wall seconds of fn() over calls, best of 5 trials.
template <class Fn>
double wall_per_call(Fn&& fn) {
  return best_seconds_per_call(fn, false, 0.05);
}

void dispatch_latency(ThreadPool& pool) {
  const double empty = wall_per_call([&] { pool.parallel_for(pool.size(), 1, [](int64_t, int64_t) {}); });
  double fastest = 1e30;  // the latency when every thread is on a core (the mean counts preemptions too)
  for (int i = 0; i < 2000; ++i) {
    const double t0 = probe_clock(false);
    pool.parallel_for(pool.size(), 1, [](int64_t, int64_t) {});
    fastest = std::min(fastest, probe_clock(false) - t0);
  }
  Owned o = make_matrix(MatFormat::INT8_G32, 512, 2048);
  std::vector<float> x(2048, 0.01f), y(512);
  const double mm = wall_per_call([&] { matmul(o.m, x.data(), 1, y.data(), pool); });
  std::printf("dispatch: empty parallel_for %.2f us mean (%.2f us fastest), 512x2048 INT8 n=1 matmul %.2f us (%.1f GB/s)\n",
              empty * 1e6, fastest * 1e6, mm * 1e6, double(qmatrix_bytes(o.m)) / mm / 1e9);
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t rows = argc > 2 ? std::atoll(argv[1]) : 4096, cols = argc > 2 ? std::atoll(argv[2]) : 4096;
  const int threads = argc > 3 ? std::atoi(argv[3]) : argc == 2 ? std::atoi(argv[1]) : 1;
  ThreadPool pool(threads);
  std::printf("matmul %lld x %lld, %d thread(s), path %s\n", (long long)rows, (long long)cols, pool.size(),
              to_string(kernel_isa()));
  // GB/s: weight bytes per call / call time (each call streams the weights once).
  std::printf("%-9s %9s %9s %9s %12s %9s %12s %13s\n", "format", "n=1 GB/s", "n=1 Gw/s", "n=4 GB/s",
              "n=4 GFLOP/s", "n=8 GB/s", "n=8 GFLOP/s", "n=32 GFLOP/s");
  std::string only = ",";  // ",int8,fp8," or "," (all)
  if (argc > 4) only.append(argv[4]).append(",");
  const int copies = argc > 5 ? std::max(1, std::atoi(argv[5])) : 1;
  if (copies > 1) std::printf("cycling through %d copies of the matrix\n", copies);
  if (pool.size() > 1) dispatch_latency(pool);
  for (MatFormat f : {MatFormat::F32, MatFormat::BF16, MatFormat::FP8_B128, MatFormat::INT4_G32,
                      MatFormat::INT8_G32}) {
    // FP8 has a third path, bf16 (kernels/matmul_bf16.hpp: activations
    // rounded to bf16 in each call, vdpbf16ps where the CPU has it, else the
    // scalar definition), the candidate for FP8 without a second copy.
    for (ProbePath path : {ProbePath::kFloat, ProbePath::kQ8, ProbePath::kBf16}) {
      if (path == ProbePath::kQ8 && !q8_supports(f)) continue;
      if (path == ProbePath::kBf16 && !bf16_supports(f)) continue;
      const char* key = f == MatFormat::F32        ? "f32"
                        : f == MatFormat::BF16     ? "bf16"
                        : f == MatFormat::FP8_B128 ? "fp8"
                        : f == MatFormat::INT4_G32 ? "int4"
                                                   : "int8";
      if (only != "," && only.find(std::string(",") + key + ",") == std::string::npos) continue;
      std::vector<Owned> Ws;
      for (int i = 0; i < copies; ++i) Ws.push_back(make_matrix(f, rows, cols));
      std::vector<float> x = random_x(32 * cols), y(size_t(32 * rows));
      const double t1 = seconds_per_call(Ws, x, 1, y, pool, path);
      const double t4 = seconds_per_call(Ws, x, 4, y, pool, path);
      const double t8 = seconds_per_call(Ws, x, 8, y, pool, path);
      const double t32 = seconds_per_call(Ws, x, 32, y, pool, path);
      const double flop = 2.0 * double(rows) * double(cols), bytes = double(qmatrix_bytes(Ws.front().m));
      const bool q8 = path == ProbePath::kQ8;
      const char* name = path == ProbePath::kBf16     ? "FP8xBF16"
                         : f == MatFormat::F32        ? "F32"
                         : f == MatFormat::BF16       ? "BF16"
                         : f == MatFormat::FP8_B128   ? "FP8_B128"
                         : f == MatFormat::INT4_G32   ? (q8 ? "INT4xQ8" : "INT4_G32")
                                                      : (q8 ? "INT8xQ8" : "INT8_G32");
      const bool scalar = path == ProbePath::kBf16 && !bf16_native();
      std::printf("%-9s %9.1f %9.2f %9.1f %12.1f %9.1f %12.1f %13.1f%s\n", name, bytes / t1 / 1e9,
                  double(rows * cols) / t1 / 1e9, bytes / t4 / 1e9, 4 * flop / t4 / 1e9, bytes / t8 / 1e9,
                  8 * flop / t8 / 1e9, 32 * flop / t32 / 1e9, scalar ? "  (scalar definition: no AVX-512 BF16)" : "");
    }
  }
  return 0;
}
