// bench_channel: what a hop between two ranks costs through RmaChannel
// (notified put, credits) versus a plain MPI_Send/MPI_Recv ping-pong in the
// same run, on whatever transport mpirun chose. Ranks 0 and 1 ping-pong;
// further ranks only take part in the collective set-up.
//
//   mpirun -n 2 bench_channel                                  # shared memory (osc/rdma)
//   mpirun -n 2 --mca osc sm bench_channel
//   mpirun -n 2 --mca btl self,tcp --mca osc pt2pt --mca btl_tcp_if_include lo bench_channel   # Open MPI 4.1
//   (Open MPI 5 keeps a one-host window in shared memory whatever the BTL:
//   across hosts, or namespaces, tests/transport/tb5_netns.sh tcp ...)
//
// Options: --min BYTES (1024) --max BYTES (64 MiB) --slot-bytes BYTES (1 MiB)
//          --slots N (4) --latency-iters N (5000) --busy-ms MS (50)
//          --work-mb MB (0: off; else the working ring, a batch-1 pipeline in miniature)
// One-way time = round trip / 2; bandwidth = bytes / one-way time. With more
// than 2 ranks, also the per-hop time of a token passed around all ranks.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "runtime/mpi_env.hpp"
#include "runtime/rma_channel.hpp"
#include "calibrate/channel_probe.hpp"

using namespace trillion;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  size_t min_bytes = 1024, max_bytes = size_t(64) << 20;
  size_t slot_bytes = size_t(1) << 20;
  int slots = 4;
  int latency_iters = 5000;
  int busy_ms = 50;
  int work_mb = 0;  // > 0: also the working ring (working_ring)
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    long long v = std::atoll(argv[i + 1]);
    if (k == "--min") o.min_bytes = size_t(v);
    else if (k == "--max") o.max_bytes = size_t(v);
    else if (k == "--slot-bytes") o.slot_bytes = size_t(v);
    else if (k == "--slots") o.slots = int(v);
    else if (k == "--latency-iters") o.latency_iters = int(v);
    else if (k == "--busy-ms") o.busy_ms = int(v);
    else if (k == "--work-mb") o.work_mb = int(v);
    else throw Error("bench_channel: unknown option " + k);
  }
  return o;
}

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

double pingpong_mpi(const MpiEnv& env, std::vector<std::byte>& buf, size_t bytes, int iters) {
  const int me = env.rank();
  auto once = [&] {
    auto guard = env.lock();
    if (me == 0) {
      mpi_check(MPI_Send(buf.data(), int(bytes), MPI_BYTE, 1, 7, env.comm()), "MPI_Send");
      mpi_check(MPI_Recv(buf.data(), int(bytes), MPI_BYTE, 1, 7, env.comm(), MPI_STATUS_IGNORE), "MPI_Recv");
    } else {
      mpi_check(MPI_Recv(buf.data(), int(bytes), MPI_BYTE, 0, 7, env.comm(), MPI_STATUS_IGNORE), "MPI_Recv");
      mpi_check(MPI_Send(buf.data(), int(bytes), MPI_BYTE, 0, 7, env.comm()), "MPI_Send");
    }
  };
  for (int i = 0; i < std::max(2, iters / 10); ++i) once();
  auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) once();
  return seconds(t0, Clock::now()) / iters / 2;
}

// Rank 1 computes for busy_ms without entering MPI while rank 0 sends one
// small message: how long the send takes shows whether one-sided
// operations progress without the target's help (progress thread, or a
// component that needs none).
double busy_target_send(RmaChannel& ch, int busy_ms) {
  std::byte b{1};
  ch.rank() == 0 ? (void)ch.recv(1) : ch.send(0, 0, std::span(&b, 1));  // both ready
  double took = 0;
  if (ch.rank() == 1) {
    auto until = Clock::now() + std::chrono::milliseconds(busy_ms);
    volatile double sink = 0;
    while (Clock::now() < until) sink = sink + 1.0;
    (void)ch.recv(0);
  } else {
    auto t0 = Clock::now();
    ch.send(1, 0, std::span(&b, 1));
    took = seconds(t0, Clock::now());
  }
  return took;
}

// A token passed around all ranks (the pipeline's hop): seconds per hop.
double ring_hop(RmaChannel& ch, int laps) {
  const int me = ch.rank(), n = ch.size();
  uint64_t token = 0;
  auto bytes = std::as_writable_bytes(std::span(&token, 1));
  auto lap = [&] {
    if (me == 0) {
      ch.send(1, 0, bytes);
      ch.recv_into(n - 1, bytes);
    } else {
      ch.recv_into(me - 1, bytes);
      ch.send((me + 1) % n, 0, bytes);
    }
  };
  for (int i = 0; i < std::max(2, laps / 10); ++i) lap();
  auto t0 = Clock::now();
  for (int i = 0; i < laps; ++i) lap();
  return seconds(t0, Clock::now()) / laps / n;
}

// A stage's compute, as far as memory goes: one read of every line of `mem`.
double stream(std::vector<float>& mem) {
  float sum = 0;
  for (size_t i = 0; i < mem.size(); i += 16) sum += mem[i];  // a line per read
  mem[size_t(sum) % mem.size()] += 1;                          // keep the reads
  return sum;
}
// A pipeline step at batch 1 in miniature: the token passed around all ranks,
// each streaming its `mem` before it passes the token on, while the others
// wait in the channel as stages do. Returns seconds per lap; *work gets the
// mean seconds of one rank's work inside the ring. Lap / ranks - work is what
// a hop costs after a long wait (a sleeping receiver, its core-mates, the
// transport's progress).
double working_ring(RmaChannel& ch, std::vector<float>& mem, int laps, double* work) {
  const int me = ch.rank(), n = ch.size();
  uint64_t token = 0;
  auto bytes = std::as_writable_bytes(std::span(&token, 1));
  double worked = 0;
  auto run = [&] {
    const auto t = Clock::now();
    stream(mem);
    worked += seconds(t, Clock::now());
  };
  auto lap = [&] {
    if (me == 0) {
      run();
      ch.send(1, 0, bytes);
      ch.recv_into(n - 1, bytes);
    } else {
      ch.recv_into(me - 1, bytes);
      run();
      ch.send((me + 1) % n, 0, bytes);
    }
  };
  for (int i = 0; i < 3; ++i) lap();
  worked = 0;
  auto t0 = Clock::now();
  for (int i = 0; i < laps; ++i) lap();
  *work = worked / laps;
  return seconds(t0, Clock::now()) / laps;
}

double ring_hop_mpi(const MpiEnv& env, int laps) {
  const int me = env.rank(), n = env.size();
  uint64_t token = 0;
  auto lap = [&] {
    auto guard = env.lock();
    if (me == 0) {
      mpi_check(MPI_Send(&token, 1, MPI_UINT64_T, 1, 8, env.comm()), "MPI_Send");
      mpi_check(MPI_Recv(&token, 1, MPI_UINT64_T, n - 1, 8, env.comm(), MPI_STATUS_IGNORE), "MPI_Recv");
    } else {
      mpi_check(MPI_Recv(&token, 1, MPI_UINT64_T, me - 1, 8, env.comm(), MPI_STATUS_IGNORE), "MPI_Recv");
      mpi_check(MPI_Send(&token, 1, MPI_UINT64_T, (me + 1) % n, 8, env.comm()), "MPI_Send");
    }
  };
  for (int i = 0; i < std::max(2, laps / 10); ++i) lap();
  auto t0 = Clock::now();
  for (int i = 0; i < laps; ++i) lap();
  return seconds(t0, Clock::now()) / laps / n;
}

int run(const MpiEnv& env, const Options& o) {
  if (env.size() < 2) throw Error("bench_channel needs at least 2 ranks (mpirun -n 2)");
  RmaChannel ch(env, {.slot_bytes = o.slot_bytes, .slots_per_peer = o.slots, .name = "bench"});
  const int me = env.rank();
  std::vector<std::byte> buf(std::max<size_t>(o.max_bytes, 8), std::byte{7});
  const bool active = me < 2;

  if (me == 0) {
    std::printf("bench_channel: %d ranks, hosts %s / %s, osc selection '%s', progress thread %s\n", env.size(),
                env.host(0).c_str(), env.host(1).c_str(), env.osc_selection().c_str(),
                env.progress_thread_running() ? "on" : "off");
    std::printf("channel: %zu-byte slots x %d per peer; one-way = round trip / 2\n\n", o.slot_bytes, o.slots);
    std::printf("%10s  %12s %10s  %12s %10s  %8s\n", "bytes", "rma_us", "rma_GB/s", "mpi_us", "mpi_GB/s",
                "rma/mpi");
  }
  std::vector<size_t> sizes = {8};
  for (size_t s = o.min_bytes; s <= o.max_bytes; s *= 4) sizes.push_back(s);
  for (size_t s : sizes) {
    const int iters = s == 8 ? o.latency_iters
                             : int(std::clamp<size_t>((size_t(256) << 20) / s, 10, size_t(o.latency_iters / 5)));
    double rma = 0, mpi = 0;
    if (active) {
      rma = pingpong_channel(ch, buf, s, iters);
      mpi = pingpong_mpi(env, buf, s, iters);
    }
    if (me == 0)
      std::printf("%10zu  %12.2f %10.3f  %12.2f %10.3f  %8.2f\n", s, rma * 1e6, double(s) / rma / 1e9, mpi * 1e6,
                  double(s) / mpi / 1e9, rma / mpi);
    std::fflush(stdout);
  }
  if (active) {
    double took = busy_target_send(ch, o.busy_ms);
    if (me == 0)
      std::printf("\nsend while the target computes %d ms outside MPI: %.3f ms\n", o.busy_ms, took * 1e3);
  }
  // Ranks 2.. wait through the channel (spin, then yield), not in a busy
  // MPI_Barrier that would steal the cores ranks 0 and 1 measure on.
  std::byte go{0};
  if (me == 0)
    for (int r = 2; r < env.size(); ++r) ch.send(r, 0, std::span(&go, 1));
  else if (!active)
    (void)ch.recv(0);
  if (env.size() > 2) {
    const double hop = ring_hop(ch, o.latency_iters / 5);
    const double hop_mpi = ring_hop_mpi(env, o.latency_iters / 5);
    if (me == 0)
      std::printf("ring of %d ranks, 8-byte token: rma %.2f us per hop, mpi %.2f us per hop, rma/mpi %.2f\n",
                  env.size(), hop * 1e6, hop_mpi * 1e6, hop / hop_mpi);
  }
  if (o.work_mb > 0) {
    // The same work timed first with every other rank asleep outside MPI
    // (rank 0 alone), then inside the ring.
    std::vector<float> mem(size_t(o.work_mb) << 18, 1.0f);
    env.barrier();
    double alone = 0;
    const int reps = 50;
    if (me == 0) {
      stream(mem);
      const auto t = Clock::now();
      for (int i = 0; i < reps; ++i) stream(mem);
      alone = seconds(t, Clock::now()) / reps;
    } else {  // ~10x what rank 0's reps take at 20 GB/s, so it works alone
      std::this_thread::sleep_for(std::chrono::milliseconds(200 + 4 * reps * o.work_mb / 10));
    }
    env.barrier();
    double work = 0;
    const double lap = working_ring(ch, mem, 200, &work);
    std::vector<double> works(size_t(env.size()));
    {
      auto guard = env.lock();
      mpi_check(MPI_Gather(&work, 1, MPI_DOUBLE, works.data(), 1, MPI_DOUBLE, 0, env.comm()), "MPI_Gather");
    }
    if (me == 0) {
      double sum = 0;
      std::printf("\nworking ring of %d ranks, each streaming %d MB before passing the token on: lap %.3f ms\n",
                  env.size(), o.work_mb, lap * 1e3);
      std::printf("  rank 0's work alone %.3f ms; in the ring, per rank:", alone * 1e3);
      for (double w : works) std::printf(" %.3f", w * 1e3), sum += w;
      std::printf(" ms\n  work in the ring / alone %.2f; per hop beyond the work %.3f ms\n",
                  sum / env.size() / alone, (lap - sum) / env.size() * 1e3);
    }
  }
  env.barrier();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MpiEnv env(argc, argv);
  return run_guarded(env, [&] { return run(env, parse(argc, argv)); });
}
