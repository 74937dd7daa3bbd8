// bench_memory: this machine's limits for the roofline — read bandwidth of a
// STREAM-like sum over a large array (1 thread and all threads; the better of
// one sequential stream and four concurrent streams per thread) and the
// multiply-add peaks (calibrate/peak_probe.hpp): FP32 FMA, and the int8 dot
// product of every integer path the CPU runs, the path in use marked. Other
// benchmarks print their figures as ratios to these.
//   bench_memory [--mib 1024] [--json]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "calibrate/memory_probe.hpp"
#include "calibrate/peak_probe.hpp"
#include "kernels/isa.hpp"

using namespace trillion;

int main(int argc, char** argv) {
  size_t mib = 1024;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--mib") && i + 1 < argc) mib = size_t(std::stoul(argv[++i]));
    else if (!std::strcmp(argv[i], "--json")) json = true;
    else {
      std::fprintf(stderr, "usage: bench_memory [--mib N] [--json]\n");
      return 2;
    }
  }
  const int threads = int(std::max(1u, std::thread::hardware_concurrency()));
  const size_t per = probe_floats_per_thread(threads, mib);
  std::vector<float*> parts = probe_arrays(threads, per);
  std::vector<float*> one{parts[0]};
  // Alternated so that both patterns see the same machine state; the limit is
  // the better of the two.
  double r1_seq = 0, rn_seq = 0, r1_4 = 0, rn_4 = 0;
  for (int round = 0; round < 2; ++round) {
    r1_seq = std::max(r1_seq, read_gbps(one, per, 3, 1));
    r1_4 = std::max(r1_4, read_gbps(one, per, 3, 4));
    rn_seq = std::max(rn_seq, read_gbps(parts, per, 3, 1));
    rn_4 = std::max(rn_4, read_gbps(parts, per, 3, 4));
  }
  const double r1 = std::max(r1_seq, r1_4), rn = std::max(rn_seq, rn_4);
  free_probe_arrays(parts);
  const std::vector<PeakRate> peaks = measure_peaks(threads);
  const PeakRate* fma = best_fp32(peaks);
  const PeakRate* int8 = int8_peak_of(peaks, kernel_isa());
  const PeakRate* bf16 = bf16_peak(peaks);
  const double f1 = fma ? fma->gops_1 : 0, fn = fma ? fma->gops_all : 0;
  if (json) {
    std::printf("{\"threads\": %d, \"read_gbps_1\": %.2f, \"read_gbps_all\": %.2f, \"fma_gflops_1\": %.1f, "
                "\"fma_gflops_all\": %.1f, \"read_gbps_1_one_stream\": %.2f, \"read_gbps_all_one_stream\": %.2f, "
                "\"read_gbps_1_four_streams\": %.2f, \"read_gbps_all_four_streams\": %.2f, \"kernel_path\": \"%s\"",
                threads, r1, rn, f1, fn, r1_seq, rn_seq, r1_4, rn_4, to_string(kernel_isa()));
    if (int8)
      std::printf(", \"int8_gops_1\": %.1f, \"int8_gops_all\": %.1f, \"int8_instruction\": \"%s\"", int8->gops_1,
                  int8->gops_all, int8->name.c_str());
    if (bf16)
      std::printf(", \"bf16_gops_1\": %.1f, \"bf16_gops_all\": %.1f, \"bf16_instruction\": \"%s\"", bf16->gops_1,
                  bf16->gops_all, bf16->name.c_str());
    std::printf(", \"peaks\": [");
    for (size_t i = 0; i < peaks.size(); ++i)
      std::printf("%s{\"name\": \"%s\", \"kind\": \"%s\", \"integer\": %s, \"path\": \"%s\", \"gops_1\": %.1f, "
                  "\"gops_all\": %.1f}",
                  i ? ", " : "", peaks[i].name.c_str(), to_string(peaks[i].kind),
                  peaks[i].kind == PeakKind::int8 ? "true" : "false", to_string(peaks[i].isa), peaks[i].gops_1,
                  peaks[i].gops_all);
    std::printf("]}\n");
  } else {
    std::printf("memory read bandwidth: %.1f GB/s (1 thread), %.1f GB/s (%d threads)\n", r1, rn, threads);
    std::printf("  one stream per thread: %.1f / %.1f GB/s; four streams per thread: %.1f / %.1f GB/s\n", r1_seq,
                rn_seq, r1_4, rn_4);
    std::printf("multiply-add peaks, G ops/s (a multiply-add is 2), 1 thread / %d threads; kernel path %s:\n", threads,
                to_string(kernel_isa()));
    for (const PeakRate& p : peaks)
      std::printf("  %-30s %8.1f %8.1f%s\n", p.name.c_str(), p.gops_1, p.gops_all,
                  &p == fma                    ? "  (FP32 FMA peak)"
                  : &p == int8                 ? "  (int8 peak of the path in use)"
                  : &p == bf16                 ? "  (bf16 dot peak: FP8 on the bf16 path)"
                                               : "");
  }
  return 0;
}
