#include "calibrate/peak_probe.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "calibrate/peak_chains.hpp"
#include "kernels/matmul_bf16.hpp"

namespace trillion {

// The probes of the ISA files (built with their flags, run only where their path is available).
#if defined(__x86_64__)
PeakLoop peak_fma_ymm();
PeakLoop peak_pair_ymm();
PeakLoop peak_dpbusd_ymm();
PeakLoop peak_fma_zmm();
PeakLoop peak_dpbusd_zmm();
PeakLoop peak_dpbf16_zmm();
#elif defined(__aarch64__)
PeakLoop peak_fmla();
PeakLoop peak_sdot();
PeakLoop peak_smmla();
#endif

namespace {

// Elsewhere: FP32 multiply-adds as the compiler vectorizes them.
float scalar_fma(float a) { return a * 0.999999f + 1e-7f; }
[[maybe_unused]] PeakLoop peak_scalar() { return peak_loop<AccumulatorChains<scalar_fma, float, 32>>(); }

struct Probe {
  const char* name;
  PeakKind kind;
  KernelIsa isa;      // runs where this path is available
  KernelIsa path;     // the kernel path whose instruction it is
  PeakLoop (*loop)();
  double ops;         // per instruction: 2 per multiply-add
  bool (*also)() = nullptr;  // a further CPU check (an extension the path's own check does not cover)
};

std::vector<Probe> probes() {
#if defined(__x86_64__)
  using K = PeakKind;
  return {{"fp32 fma ymm", K::fp32, KernelIsa::avx2, KernelIsa::avx2, peak_fma_ymm, 16},
          {"int8 vpmaddubsw+vpmaddwd ymm", K::int8, KernelIsa::avx2, KernelIsa::avx2, peak_pair_ymm, 64},
          {"int8 vpdpbusd ymm", K::int8, KernelIsa::avx2_vnni, KernelIsa::avx2_vnni, peak_dpbusd_ymm, 64},
          {"fp32 fma zmm", K::fp32, KernelIsa::avx512, KernelIsa::avx512, peak_fma_zmm, 32},
          {"int8 vpdpbusd zmm", K::int8, KernelIsa::avx512, KernelIsa::avx512, peak_dpbusd_zmm, 128},
          {"bf16 vdpbf16ps zmm", K::bf16, KernelIsa::avx512, KernelIsa::avx512, peak_dpbf16_zmm, 64,
           bf16_native}};
#elif defined(__aarch64__)
  // SDOT runs wherever dotprod does; its probe waits for neon-i8mm, whose
  // check includes dotprod (a CPU with dotprod alone, Apple M1, has no int8 figure).
  using K = PeakKind;
  return {{"fp32 fmla q", K::fp32, KernelIsa::neon, KernelIsa::neon, peak_fmla, 8},
          {"int8 sdot q", K::int8, KernelIsa::neon_i8mm, KernelIsa::neon, peak_sdot, 32},
          {"int8 smmla q", K::int8, KernelIsa::neon_i8mm, KernelIsa::neon_i8mm, peak_smmla, 64}};
#else
  return {{"fp32 scalar", PeakKind::fp32, KernelIsa::portable, KernelIsa::portable, peak_scalar, 2}};
#endif
}

volatile double g_sink;

// G ops/s of `threads` threads each running the loop, best of 9.
//
// The threads first spin together until all have started and a few
// milliseconds more, and only then are timed: threads just created start on
// their creator's CPU, and a short probe timed at once ran two of them on
// one core for the whole of some runs (the 2-thread int8 figure read half of
// itself in about one run of three here, while the kernels it is the limit
// of ran on both cores).
double rate(const PeakLoop& loop, double ops, int threads) {
  const long rounds = 100'000'000L / loop.chains;  // 1e8 instructions a thread, about 0.03-0.05 s
  double best = 0;
  for (int trial = 0; trial < 9; ++trial) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&] {
        ready.fetch_add(1);
        while (!go.load(std::memory_order_acquire)) {
        }
        g_sink = loop.run(rounds);
      });
    while (ready.load() < threads) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the spinning threads spread over the cores
    const auto t0 = std::chrono::steady_clock::now();
    go.store(true, std::memory_order_release);
    for (auto& th : ts) th.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, double(threads) * double(rounds) * loop.chains * ops / s / 1e9);
  }
  return best;
}

}  // namespace

std::vector<PeakRate> measure_peaks(int threads) {
  std::vector<PeakRate> out;
  for (const Probe& p : probes()) {
    if (!kernel_isa_available(p.isa) || (p.also && !p.also())) continue;
    const PeakLoop loop = p.loop();
    out.push_back({p.name, p.kind, p.path, rate(loop, p.ops, 1), rate(loop, p.ops, threads)});
  }
  return out;
}

const PeakRate* best_fp32(const std::vector<PeakRate>& peaks) {
  const PeakRate* best = nullptr;
  for (const PeakRate& p : peaks)
    if (p.kind == PeakKind::fp32 && (!best || p.gops_all > best->gops_all)) best = &p;
  return best;
}

// The path's own instruction: avx2 pairs, avx2-vnni and avx512 vpdpbusd,
// neon SDOT; neon-i8mm the faster of SDOT (its INT8) and SMMLA (its INT4).
const PeakRate* int8_peak_of(const std::vector<PeakRate>& peaks, KernelIsa isa) {
  const PeakRate* best = nullptr;
  for (const PeakRate& p : peaks) {
    const bool serves = p.isa == isa || (isa == KernelIsa::neon_i8mm && p.isa == KernelIsa::neon);
    if (p.kind == PeakKind::int8 && serves && (!best || p.gops_all > best->gops_all)) best = &p;
  }
  return best;
}

const PeakRate* bf16_peak(const std::vector<PeakRate>& peaks) {
  for (const PeakRate& p : peaks)
    if (p.kind == PeakKind::bf16) return &p;
  return nullptr;
}

const char* to_string(PeakKind k) {
  switch (k) {
    case PeakKind::fp32: return "fp32";
    case PeakKind::int8: return "int8";
    case PeakKind::bf16: return "bf16";
  }
  return "?";
}

}  // namespace trillion
