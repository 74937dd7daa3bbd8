// A fixed pool of worker threads for data-parallel loops inside one rank.
// Work is split by output index ranges (rows/columns), never by a reduction
// dimension, so results do not depend on the thread count (DESIGN:
// determinism by construction).
//
// Dispatch: decode runs hundreds of small matmuls per token, so a
// condition-variable wake-up per call (5-50 us measured) would dominate.
// Workers and the caller spin on atomics for a while (200 us, pausing and
// yielding the core every ~10 us so that ranks oversubscribing the cores
// still progress), then sleep on a condition variable, so an idle process
// burns no CPU. bench_matmul with 2+ threads prints the dispatch latency.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace trillion {

class ThreadPool {
 public:
  // n_threads <= 0: the machine's hardware concurrency.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }  // the caller works too

  // Calls fn(begin, end) on disjoint contiguous chunks covering [0, n), each at
  // least `grain` long (except the last), and returns when all are done.
  // Not reentrant: fn must not call parallel_for on the same pool.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  // The job: written by the caller before generation_ is bumped (release),
  // read by workers after they see the new generation (acquire).
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0, job_chunk_ = 0;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};  // workers yet to finish the current job
  std::atomic<bool> stop_{false};
  // Sleeping: generation_ is bumped and pending_ reaches 0 under mu_, so a
  // thread that checks its condition under mu_ before waiting misses no wake-up.
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
};

}  // namespace trillion
