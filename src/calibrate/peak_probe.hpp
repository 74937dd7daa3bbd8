// The machine's multiply-add peaks for the roofline: FP32 FMA (the float
// path's limit) and the int8 dot product of every integer path this CPU runs
// (what the integer-dot kernels, matmul_q8.hpp, are measured against).
// Used by bench_memory; bench/run_all.py prints each kernel and model row as
// a fraction of them.
#pragma once
#include <string>
#include <vector>

#include "kernels/isa.hpp"

namespace trillion {

// What a probe's instruction computes: FP32 FMA (the float path), an int8
// dot product (the integer path), or a bf16 pair dot product (the bf16 path
// for FP8 weights, kernels/matmul_bf16.hpp), so no kind's figure is taken for
// another's peak.
enum class PeakKind { fp32, int8, bf16 };
const char* to_string(PeakKind k);

// One instruction's throughput: independent chains of it on every thread,
// the best of a few runs. Ops count a multiply-add as 2 (as FLOP do), so an
// int8 figure and an FP32 one compare directly.
struct PeakRate {
  std::string name;        // e.g. "fp32 fma ymm", "int8 vpmaddubsw+vpmaddwd ymm"
  PeakKind kind = PeakKind::fp32;
  KernelIsa isa{};         // the kernel path that runs this instruction
  double gops_1 = 0;       // 1 thread, G ops/s
  double gops_all = 0;     // `threads` threads
};

// Every probe this CPU (and build) runs, on 1 and on `threads` threads.
std::vector<PeakRate> measure_peaks(int threads);

// The best FP32 figure of `peaks` (FMA peak) and the int8 figure of the
// integer path `isa` computes with (null when the path has no int8 probe: portable).
const PeakRate* best_fp32(const std::vector<PeakRate>& peaks);
const PeakRate* int8_peak_of(const std::vector<PeakRate>& peaks, KernelIsa isa);
// The bf16 dot product's figure (null where the CPU has none: the bf16 path
// then runs its scalar definition).
const PeakRate* bf16_peak(const std::vector<PeakRate>& peaks);

}  // namespace trillion
