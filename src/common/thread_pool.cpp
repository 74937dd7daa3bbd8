#include "common/thread_pool.hpp"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace trillion {
namespace {

// How long a thread spins before sleeping: longer than the gap between two
// matmuls of a decode step, short enough that an idle pool sleeps at once.
constexpr auto kSpin = std::chrono::microseconds(200);
// Pause iterations between clock checks, and between yields of the core
// (~10 us: when ranks oversubscribe the cores, the thread a spinner waits for
// gets to run; when nothing else is runnable, sched_yield returns at once).
constexpr int kClockEvery = 64, kYieldEvery = 512;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins until done() for up to kSpin; true when done() became true.
template <class Done>
bool spin_until(Done&& done) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (int i = 1;; ++i) {
    if (done()) return true;
    cpu_relax();
    if (i % kYieldEvery == 0) std::this_thread::yield();
    if (i % kClockEvery == 0 && std::chrono::steady_clock::now() > deadline) return done();
  }
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = int(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    auto started = [&] { return generation_.load(std::memory_order_acquire) != seen; };
    if (!spin_until(started)) {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, started);
    }
    if (stop_.load(std::memory_order_relaxed)) return;
    seen = generation_.load(std::memory_order_acquire);
    const int64_t n = job_n_, chunk = job_chunk_;
    const int64_t begin = int64_t(index) * chunk;
    if (begin < n) (*job_)(begin, std::min(n, begin + chunk));
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);  // the caller may be checking pending_ before sleeping
      done_cv_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t threads = std::min<int64_t>(size(), (n + grain - 1) / grain);
  if (threads <= 1 || workers_.empty()) {
    fn(0, n);
    return;
  }
  const int64_t chunk = (n + threads - 1) / threads;
  job_ = &fn;
  job_n_ = n;
  job_chunk_ = chunk;
  pending_.store(int(workers_.size()), std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  start_cv_.notify_all();  // no system call when no worker sleeps
  fn(0, std::min(n, chunk));
  auto done = [&] { return pending_.load(std::memory_order_acquire) == 0; };
  if (!spin_until(done)) {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, done);
  }
}

}  // namespace trillion
