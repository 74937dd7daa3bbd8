// trillion calibrate [--output PROFILE.json] [--name NAME] [--quick]
//   (mpirun -np 2 trillion calibrate ... adds the link between ranks 0 and 1)
// Measures the host it runs on into a profile `trillion plan --profile`
// reads (plan/profile.hpp, docs/planning.md): read bandwidth (all cores, one
// core), the FLOP/s one core reaches per kernel ("<format>/<path>") at batch
// 1..128 with the weights in cache, float32 dot/axpy (attention over the
// cache), the thread pool's dispatch time, and under mpirun the RMA channel's
// one-way latency and bandwidth. Every figure is labelled "measured".
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>

#include "app/commands.hpp"
#include "app/run_options.hpp"
#include "calibrate/channel_probe.hpp"
#include "calibrate/kernel_probe.hpp"
#include "calibrate/memory_probe.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/thread_pool.hpp"
#include "kernels/isa.hpp"
#include "kernels/matmul.hpp"
#include "kernels/matmul_bf16.hpp"
#include "kernels/matmul_q8.hpp"
#include "kernels/vector_ops.hpp"
#include "parallel/run_footprint.hpp"
#include "plan/profile.hpp"
#include "runtime/mpi_env.hpp"
#include "runtime/rma_channel.hpp"

namespace po = boost::program_options;

namespace trillion::app {
namespace {

using json = nlohmann::json;

const struct {
  MatFormat f;
  const char* name;
} kFormats[] = {{MatFormat::F32, "f32"}, {MatFormat::BF16, "bf16"}, {MatFormat::FP8_B128, "fp8"},
                {MatFormat::INT4_G32, "int4"}, {MatFormat::INT8_G32, "int8"}};

// FLOP/s of one core at each batch, per kernel, of a 1024 x 2048 matrix.
// streaming_mib 0: one matrix, which stays in cache (1-8 MB): the compute side
// of the roofline. Otherwise copies of it cycled, streaming_mib MiB in all as
// the bandwidth probe's (past the caches: some VMs report an L3 of hundreds of
// MiB), out of a file mapping as the engine reads its shards (page cache,
// read in on 2 MiB pages where the kernel gives them, kernel_probe.hpp):
// below the in-cache rates where the kernel cannot hide the reads, at few
// rows and for formats slow to unpack (bf16 at one row can stream at half its
// in-cache rate).
json kernel_rates(bool quick, bool wall, int64_t streaming_mib = 0) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string scratch = tmp && *tmp ? tmp : "/tmp";
  const int64_t rows = 1024, cols = 2048;
  ThreadPool pool(1);
  json out = json::object();
  const std::vector<int64_t> batches = quick ? std::vector<int64_t>{1, 32} : std::vector<int64_t>{1, 4, 8, 32, 128};
  const std::vector<float> x = random_x(128 * cols);
  std::vector<float> y(static_cast<size_t>(128 * rows));
  for (const auto& f : kFormats) {
    std::vector<Owned> in_cache;
    in_cache.push_back(make_matrix(f.f, rows, cols));  // moved: its QMatrix points into its own buffers
    const double bytes = double(in_cache[0].data.size() + in_cache[0].scale.size());
    std::unique_ptr<FileBackedMatrices> streaming;
    if (streaming_mib > 0)
      streaming = std::make_unique<FileBackedMatrices>(
          in_cache[0], int(std::ceil(double(streaming_mib) * (1 << 20) / bytes)), scratch);
    const std::vector<Owned>& W = streaming ? streaming->matrices() : in_cache;
    // One untimed pass over every copy first, as a model's warm-up step
    // (scheduler/warmup.cpp) reads its weights before requests: the first
    // trials of a fresh mapping can run ten times slower on a VM whose page
    // faults are slow.
    for (const Owned& w : W) matmul(w.m, x.data(), 1, y.data(), pool);
    // Each path the format has (model/linear.cpp): "fp8/f32", "int8/int8", "fp8/bf16", ...
    for (ProbePath path : {ProbePath::kFloat, ProbePath::kQ8, ProbePath::kBf16}) {
      if (path == ProbePath::kQ8 && !q8_supports(f.f)) continue;
      if (path == ProbePath::kBf16 && !bf16_supports(f.f)) continue;
      const char* suffix = path == ProbePath::kQ8 ? "/int8" : path == ProbePath::kBf16 ? "/bf16" : "/f32";
      for (int64_t n : batches) {
        const double s = seconds_per_call(W, x, n, y, pool, path, quick ? 0.01 : 0.03, wall);
        out[std::string(f.name) + suffix][std::to_string(n)] = 2.0 * double(rows * cols * n) / s;
      }
    }
  }
  return out;
}

// float32 dot + axpy over 576-float rows (a cache block of c_kv + k_pe), one core.
double vector_rate(bool wall) {
  const int64_t n = 576, rows = 256;
  std::vector<float> a(size_t(n * rows), 0.01f), q(size_t(n), 0.5f), acc(size_t(n), 0.0f);
  volatile float sink = 0;
  double best = 1e30;
  for (int trial = 0; trial < 5; ++trial) {
    const double t0 = probe_clock(!wall);
    int reps = 0;
    do {
      for (int64_t r = 0; r < rows; ++r) {
        const float s = dot(q.data(), &a[size_t(r * n)], n);
        axpy(s * 1e-6f, &a[size_t(r * n)], acc.data(), n);
      }
      ++reps;
    } while (probe_clock(!wall) - t0 < 0.02);
    best = std::min(best, (probe_clock(!wall) - t0) / reps);
    sink = sink + acc[0];
  }
  return 4.0 * double(n * rows) / best;
}

double dispatch_seconds(int threads) {
  if (threads < 2) return 0.0;
  ThreadPool pool(threads);
  const int calls = 2000;
  const double t0 = probe_clock(false);
  for (int i = 0; i < calls; ++i) pool.parallel_for(pool.size(), 1, [](int64_t, int64_t) {});
  return (probe_clock(false) - t0) / calls;
}

json measure_link(const MpiEnv& env, RmaChannel& ch, bool quick) {
  if (env.rank() >= 2) return json();
  std::vector<std::byte> buf(size_t(4) << 20, std::byte{7});
  const double lat = pingpong_channel(ch, buf, 8, quick ? 200 : 2000);
  const double big = pingpong_channel(ch, buf, buf.size(), quick ? 5 : 40);
  return {{"name", "RMA channel " + env.host(0) + " -> " + env.host(1) + " (osc " + env.osc_selection() + ")"},
          {"latency_s", lat},
          {"bandwidth_bytes_per_s", double(buf.size()) / big},
          {"sources",
           {{"latency_s", "measured by trillion calibrate: 8-byte RMA channel round trip / 2, ranks 0 and 1"},
            {"bandwidth_bytes_per_s", "measured by trillion calibrate: 4 MiB RMA channel round trip / 2"}}}};
}

}  // namespace

int run_calibrate(const Args& args) {
  std::string output, name;
  bool quick = false, wall = false;
  int mib = 1024;
  po::options_description desc("options");
  desc.add_options()
      ("output,o", po::value(&output), "write the profile here (default: standard output)")
      ("name", po::value(&name), "the host's name in the profile (default: its hostname)")
      ("mib", po::value(&mib)->default_value(1024), "MiB of the bandwidth probe's array (larger than the caches)")
      ("quick", po::bool_switch(&quick), "fewer batches and shorter trials (tests)")
      ("wall-clock", po::bool_switch(&wall),
       "time kernels by the wall clock, as a run on a shared machine sees them (default: the thread's CPU time, "
       "the machine's own rate whatever else runs)");
  if (!parse_args(args, "usage: [mpirun -np 2] trillion calibrate [--output PROFILE.json] [--name NAME] [--quick]",
                  desc))
    return 0;
  if (mib < 16 || mib > 65536) throw InputError("--mib must be 16..65536");
  int argc = 0;
  char** argv = nullptr;
  MpiEnv env(argc, argv);
  return run_guarded(env, [&] {
    env.check_same_library();
    // Rank 0 measures the host while the others wait in the channel (spin,
    // then yield: not in a spinning MPI_Barrier that would take a core).
    std::unique_ptr<RmaChannel> ch;
    if (env.size() >= 2)
      ch = std::make_unique<RmaChannel>(env, ChannelConfig{.slot_bytes = size_t(1) << 20, .slots_per_peer = 4,
                                                           .name = "calibrate"});
    std::byte go{0};
    if (env.rank() != 0) {
      (void)ch->recv(0);
      (void)measure_link(env, *ch, quick);
      return 0;
    }
    const int cores = physical_cores();
    const double bw_all = measure_read_gbps(cores, size_t(mib), quick ? 1 : 2) * 1e9;
    const double bw_one = measure_read_gbps(1, size_t(mib) / 2, quick ? 1 : 2) * 1e9;
    const std::string m = "measured by trillion calibrate";
    HostProfile h;
    h.name = name.empty() ? env.host() : name;
    h.memory_bytes = int64_t(physical_memory_bytes());
    h.cores = cores;
    h.bandwidth = std::max(bw_all, bw_one);
    h.bandwidth_per_core = bw_one;
    h.vector_flops_per_core = vector_rate(wall);
    h.dispatch_seconds = dispatch_seconds(cores);
    h.wake_seconds = sleeping_wait_wake_seconds(quick ? 10 : 100);
    json j = {{"format", "trillion-profile/1"}, {"source", m + " (kernel path " + std::string(to_string(kernel_isa())) + ")"}};
    j["host"] = to_json(h);
    j["host"]["kernels"] = kernel_rates(quick, wall);
    j["host"]["kernels_streaming"] = kernel_rates(quick, wall, mib);
    j["host"]["sources"] = {
        {"memory_bytes", m + ": physical memory (sysconf)"},
        {"cores", m + ": physical cores (the engine's default thread count)"},
        {"bandwidth_bytes_per_s", m + ": STREAM-like read, all cores, better of 1 and 4 streams per thread"},
        {"bandwidth_per_core_bytes_per_s", m + ": the same on one core"},
        {"vector_flops_per_core", m + ": float32 dot + axpy over 576-float rows, one core"},
        {"dispatch_seconds", m + ": an empty parallel_for on every core"},
        {"wake_seconds", m + ": a wait that has begun to sleep notices a flag set 3 ms in this late (mean)"},
        {"kernels", m + ": matmul of a 1024 x 2048 matrix in cache, one core, FLOP/s per batch, " +
                        (wall ? "wall clock" : "thread CPU time")},
        {"kernels_streaming", m + ": the same matmuls with the weights streaming from a file mapping (" +
                                  std::to_string(mib) + " MiB of copies cycled), one core, FLOP/s per batch"}};
    if (ch) {
      for (int r = 1; r < env.size(); ++r) ch->send(r, 0, std::span(&go, 1));
      j["link"] = measure_link(env, *ch, quick);
    }
    const std::string text = j.dump(2) + "\n";
    if (output.empty())
      std::cout << text;
    else
      write_file_atomically(output, text);
    return 0;
  });
}

}  // namespace trillion::app
