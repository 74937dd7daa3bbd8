// Measures of this machine's limits for the roofline: read bandwidth of a
// STREAM-like sum over a large array (the better of one sequential stream and
// four concurrent streams per thread). Used by bench_memory and by `trillion
// calibrate` (the host profile `plan` reads); the multiply-add peaks are
// peak_probe.hpp's.
#pragma once
#include <cstddef>
#include <vector>

#include "common/thread_pool.hpp"

namespace trillion {

// Best GB/s (1e9 bytes/s) of `reps` concurrent sums, one thread per part, of
// per_thread floats each; streams: 1 (one sequential pass) or 4 (the part's
// quarters at once).
double read_gbps(const std::vector<float*>& parts, size_t per_thread, int reps, int streams);

// One read as read_gbps's, on the pool's threads (parts: one per thread), so
// that a caller whose pool spins between its calls (common/thread_pool.hpp)
// does not read against its own spinning workers. GB/s.
double read_gbps_once(ThreadPool& pool, const std::vector<float*>& parts, size_t per_thread, int streams);

// `threads` arrays of per_thread floats each (64-byte aligned, every page
// touched) for read_gbps; free_probe_arrays releases them.
std::vector<float*> probe_arrays(int threads, size_t per_thread);
void free_probe_arrays(std::vector<float*>& parts);
// Floats per thread for `threads` threads over `mib` MiB (a multiple of 32).
size_t probe_floats_per_thread(int threads, size_t mib);

// Read bandwidth of `threads` threads over `mib` MiB in all (allocated,
// touched and freed here): the better of one and four streams per thread,
// best of `rounds` alternations. GB/s.
double measure_read_gbps(int threads, size_t mib, int rounds = 2);

}  // namespace trillion
