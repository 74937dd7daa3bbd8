// A fixed pool of worker threads for data-parallel loops inside one rank.
// Work is split by output index ranges (rows/columns), never by a reduction
// dimension, so results do not depend on the thread count
// (docs/determinism.md).
//
// Dispatch: decode runs hundreds of small matmuls per token, and a
// condition-variable wake-up per call costs microseconds to tens of them. So
// workers and the caller first spin on atomics for up to TRILLION_POOL_SPIN_US
// (default 5000; pausing, yielding the core every ~10 us): dispatch then takes
// well under a microsecond, and a small matmul on 2 threads a fraction of its
// time with wake-ups. The spin adapts (SpinWait): a wait that ends while spinning
// doubles the next spin, and so does one that slept but would have fitted in
// the limit; a longer one (an idle pool) halves it (floor ~1 us). Then they
// sleep on a condition variable, so an idle process burns at most one spin
// of CPU. The limit is long because a sleeping thread of a virtual machine
// can take a millisecond to wake (thread_pool.cpp). Ranks that oversubscribe
// the cores lose to spinning (docs/kernels.md, "Threads"): callers that know the cores are shared pass
// spin = false (the cluster does when a host's ranks x threads exceed its
// cores); TRILLION_POOL_SPIN_US=0 turns spinning off everywhere.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace trillion {

// The cores a pool defaults to: Linux's physical cores (SMT siblings count
// once), macOS's performance cores (platform::compute_cores says how each
// is found). Decode is bandwidth-bound and a sibling or an efficiency core
// only competes for the same memory and FMA units.
int physical_cores();

// The most threads a pool may have: 8 per hardware thread (at least 64), at
// most kMaxThreads. More only adds switching, and a typo (--threads 100000)
// would otherwise start threads until the process table is full. Checked
// before any thread starts: flags by their commands (naming the flag), every
// pool by its constructor.
constexpr int kMaxThreads = 1024;
int thread_limit();

class ThreadPool {
 public:
  // n_threads <= 0: physical_cores() (up to thread_limit()). spin = false: workers sleep at once.
  // Throws Error when n_threads > thread_limit(), before starting any.
  explicit ThreadPool(int n_threads = 0, bool spin = true);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }  // the caller works too

  // Calls fn(begin, end) on disjoint contiguous chunks covering [0, n), each at
  // least `grain` long (except the last), and returns when all are done.
  // Not reentrant: fn must not call parallel_for on the same pool.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  // The spin-then-sleep wait of one thread (see the top of the file).
  struct SpinWait {
    int64_t limit_ns = 0, budget_ns = 0;
    int64_t min_ns() const;  // the floor of budget_ns: ~1 us, or 0 when spinning is off
    template <class Done, class Sleep>
    void wait(Done&& done, Sleep&& sleep);
  };

  void worker_loop(int index);

  int64_t spin_limit_ns_ = 0;
  int64_t blocks_per_thread_ = 4;
  SpinWait caller_spin_;

  std::vector<std::thread> workers_;
  // The job: written by the caller before generation_ is bumped (release),
  // read by workers after they see the new generation (acquire).
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0, job_chunk_ = 0;
  // Thread i's share of the current job's blocks: [front, back), packed as
  // front << 32 | back. It takes its own from the front, in order; a thread
  // whose share is done takes others' from the back (work stealing).
  struct alignas(64) Share {
    std::atomic<uint64_t> blocks{0};
  };
  std::unique_ptr<Share[]> shares_;
  static bool take(Share& s, bool front, int64_t& block);
  void run_blocks(int self);  // runs blocks of the current job until none is left
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};  // workers yet to finish the current job
  std::atomic<bool> stop_{false};
  // Sleeping: generation_ is bumped and pending_ reaches 0 under mu_, so a
  // thread that checks its condition under mu_ before waiting misses no wake-up.
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
};

}  // namespace trillion
