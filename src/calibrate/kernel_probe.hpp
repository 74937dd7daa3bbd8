// Kernel rates of the matmul paths per weight format and batch size, as
// bench_matmul prints them and `trillion calibrate` writes them into a host
// profile: a synthetic matrix of each format (small finite values), and the
// best time per call of matmul (f32 path) or quantize + matmul_q8 (int8 path).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/thread_pool.hpp"
#include "kernels/qmatrix.hpp"

namespace trillion {

struct Owned {
  std::vector<uint8_t> data, scale;
  QMatrix m;
};

// A rows x cols matrix of format f, owning its bytes.
Owned make_matrix(MatFormat f, int64_t rows, int64_t cols);

// Copies of matrices that live where the engine's weights do: in place in a
// read-only shared mapping of a file (a model's shards are used from their
// mmap), read in from disk through a mapping advised for 2 MiB pages as the
// loader's is (format/mapped_file.hpp), not in anonymous memory. The file is
// unlinked at once; the mapping goes with this.
class FileBackedMatrices {
 public:
  // `copies` copies of `one` (each its own pages: streaming them costs what
  // distinct weights do), in a file made in `dir` (TMPDIR).
  FileBackedMatrices(const Owned& one, int copies, const std::string& dir);
  ~FileBackedMatrices();
  FileBackedMatrices(const FileBackedMatrices&) = delete;
  FileBackedMatrices& operator=(const FileBackedMatrices&) = delete;
  const std::vector<Owned>& matrices() const { return views_; }

 private:
  void* base_ = nullptr;
  size_t size_ = 0;
  std::vector<Owned> views_;  // QMatrix views into the mapping (no owned bytes)
};

// Activations like a model's (random signs and sizes), so quantization sees real groups.
std::vector<float> random_x(int64_t count);

// Seconds now: this thread's CPU time (cpu_time) or the steady clock.
double probe_clock(bool cpu_time);

// Mean seconds per fn() call over a trial of at least min_trial_seconds,
// best of 5 trials, after one warm-up call.
template <class Fn>
double best_seconds_per_call(Fn&& fn, bool cpu_time, double min_trial_seconds) {
  fn();
  double best = 1e30;
  for (int trial = 0; trial < 5; ++trial) {
    int reps = 0;
    const double t0 = probe_clock(cpu_time);
    double elapsed = 0;
    do {
      fn();
      ++reps;
      elapsed = probe_clock(cpu_time) - t0;
    } while (elapsed < min_trial_seconds);
    best = elapsed / reps < best ? elapsed / reps : best;
  }
  return best;
}

// A matmul's compute path: float activations, the integer-dot path
// (kernels/matmul_q8.hpp) or the bf16 path (kernels/matmul_bf16.hpp).
enum class ProbePath { kFloat, kQ8, kBf16 };

// Best of 5 trials of the seconds per call, cycling through Ws (distinct
// matrices stream from memory; one matrix stays in cache); kQ8 and kBf16
// convert the activations in every call, as a model step does.
// One thread: this thread's CPU time (robust when other jobs share the cores)
// unless wall_clock (what a run sees on a shared machine).
double seconds_per_call(const std::vector<Owned>& Ws, const std::vector<float>& x, int64_t n, std::vector<float>& y,
                        ThreadPool& pool, ProbePath path = ProbePath::kFloat, double min_trial_seconds = 0.1,
                        bool wall_clock = false);

}  // namespace trillion
