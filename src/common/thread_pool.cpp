#include "common/thread_pool.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>

#include "common/cpu_relax.hpp"
#include "common/error.hpp"
#include "platform/cpu.hpp"

namespace trillion {
namespace {

using Clock = std::chrono::steady_clock;

// The longest spin before sleeping (TRILLION_POOL_SPIN_US overrides; 0 never
// spins). Not just the gap between two matmuls of a decode step (a few us):
// a wait also lasts as long as the other thread's share runs late, and on a
// virtual machine a sleeping thread's core may be handed back to the host,
// so its wake-up can take a millisecond. On the bench model's batch-1
// decode a 50 us limit left the cores idle for a large part of the step;
// 1000 us and 5000 us kept them busy, 5000 the fastest.
constexpr int64_t kDefaultSpinUs = 5000;
// Pause iterations between clock checks, and between yields of the core
// (~10 us). Yields are rare on purpose: on a loaded machine one hands the
// core to another process for a whole time slice.
constexpr int kClockEvery = 64, kYieldEvery = 512;
// Blocks a parallel_for aims to give each thread (its share; others may take them).
// TRILLION_POOL_BLOCKS overrides it (1 is a static split, one block per
// thread: bench/bench_slow_core.py's baseline).
constexpr int64_t kBlocksPerThread = 4;
constexpr int64_t kMinSpinNs = 1000;  // the shortest adaptive spin (~1 us: cheap, and catches back-to-back jobs)

int64_t spin_limit_ns() {
  const char* env = std::getenv("TRILLION_POOL_SPIN_US");
  const int64_t us = env ? std::max<int64_t>(0, std::atoll(env)) : kDefaultSpinUs;
  return us * 1000;
}

int64_t blocks_per_thread() {
  const char* env = std::getenv("TRILLION_POOL_BLOCKS");
  return env ? std::clamp<int64_t>(std::atoll(env), 1, 64) : kBlocksPerThread;
}

}  // namespace

int64_t ThreadPool::SpinWait::min_ns() const { return std::min(limit_ns, kMinSpinNs); }

template <class Done, class Sleep>
void ThreadPool::SpinWait::wait(Done&& done, Sleep&& sleep) {
  if (done()) return;
  const Clock::time_point t0 = Clock::now();
  if (budget_ns > 0) {
    const Clock::time_point deadline = t0 + std::chrono::nanoseconds(budget_ns);
    for (int i = 1;; ++i) {
      if (done()) {
        budget_ns = std::min(limit_ns, 2 * budget_ns);  // paid: spin up to twice as long next time
        return;
      }
      cpu_relax();
      if (i % kYieldEvery == 0) std::this_thread::yield();
      if (i % kClockEvery == 0 && Clock::now() > deadline) break;
    }
  }
  sleep();
  // Judged by the whole wait, sleep included: one the limit would have
  // covered means spinning pays (spin at least that long next time, so a
  // budget that shrank while the pool was idle grows back); a longer one is
  // an idle pool: spin half as long next time, but still a little.
  const int64_t waited = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
  budget_ns = waited <= limit_ns ? std::min(limit_ns, std::max(2 * budget_ns, waited))
                                 : std::max(min_ns(), budget_ns / 2);
}

int physical_cores() { return platform::compute_cores(); }

int thread_limit() {
  const int logical = int(std::max(1u, std::thread::hardware_concurrency()));
  return std::min(kMaxThreads, std::max(64, 8 * logical));
}

ThreadPool::ThreadPool(int n_threads, bool spin)
    : spin_limit_ns_(spin ? spin_limit_ns() : 0), blocks_per_thread_(blocks_per_thread()) {
  if (n_threads <= 0) n_threads = std::min(physical_cores(), thread_limit());
  if (n_threads > thread_limit())
    throw Error("a pool of " + std::to_string(n_threads) + " threads exceeds the limit of " +
                std::to_string(thread_limit()) + " on this host");
  caller_spin_ = {spin_limit_ns_, spin_limit_ns_};
  shares_.reset(new Share[size_t(n_threads)]);
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

bool ThreadPool::take(Share& s, bool front, int64_t& block) {
  uint64_t v = s.blocks.load(std::memory_order_relaxed);
  for (;;) {
    const uint64_t f = v >> 32, b = v & 0xffffffffu;
    if (f >= b) return false;
    const uint64_t next = front ? ((f + 1) << 32 | b) : (f << 32 | (b - 1));
    if (s.blocks.compare_exchange_weak(v, next, std::memory_order_relaxed)) {
      block = int64_t(front ? f : b - 1);
      return true;
    }
  }
}

void ThreadPool::run_blocks(int self) {
  const int64_t n = job_n_, chunk = job_chunk_, threads = size();
  auto run = [&](int64_t block) { (*job_)(block * chunk, std::min(n, (block + 1) * chunk)); };
  int64_t block;
  while (take(shares_[self], true, block)) run(block);
  for (int64_t k = 1; k < threads; ++k)
    while (take(shares_[(self + k) % threads], false, block)) run(block);
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  SpinWait spin{spin_limit_ns_, spin_limit_ns_};
  for (;;) {
    auto started = [&] { return generation_.load(std::memory_order_acquire) != seen; };
    spin.wait(started, [&] {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, started);
    });
    if (stop_.load(std::memory_order_relaxed)) return;
    seen = generation_.load(std::memory_order_acquire);
    run_blocks(index);
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
  // Each thread owns a contiguous share of blocks (blocks_per_thread_ when
  // the grain allows) and runs them front to back, so its reads stay one
  // sequential stream per row tile (the hardware prefetchers keep up across
  // blocks; claiming blocks from one shared counter interleaved the threads,
  // and each block restarted its streams: 512 x 2048 INT4 products on 2
  // threads streamed 10-20% slower). A thread whose share is done takes
  // blocks from the back of the others': a core that runs slow (an
  // efficiency core, a preempted one) then costs its share of the blocks,
  // not the whole call. A block's output never depends on which thread
  // computes it.
  const int64_t chunk = std::max(grain, (n + threads * blocks_per_thread_ - 1) / (threads * blocks_per_thread_));
  job_ = &fn;
  job_n_ = n;
  job_chunk_ = chunk;
  const int64_t blocks = (n + chunk - 1) / chunk;
  for (int64_t i = 0; i < size(); ++i) {  // threads past `threads` own none
    const uint64_t f = uint64_t(std::min(i, threads) * blocks / threads);
    const uint64_t b = uint64_t(std::min(i + 1, threads) * blocks / threads);
    shares_[i].blocks.store(f << 32 | b, std::memory_order_relaxed);
  }
  pending_.store(int(workers_.size()), std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  start_cv_.notify_all();  // no system call when no worker sleeps
  run_blocks(0);
  auto done = [&] { return pending_.load(std::memory_order_acquire) == 0; };
  caller_spin_.wait(done, [&] {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, done);
  });
}

}  // namespace trillion
