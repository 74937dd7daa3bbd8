// Waiting without burning the core a peer needs. With more ranks than cores
// a pure spin costs a scheduler slice per hop and usleep tens of
// microseconds. Spinning briefly then calling sched_yield is right when a
// core is free for the peer; when ranks outnumber cores, yielding at once is
// best, at parity with MPI_Send/Recv (docs/rma.md, "Waiting: spin, then
// yield", has the measurements).
#pragma once
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "common/cpu_relax.hpp"

namespace trillion {

class Backoff {
 public:
  // Checks spun before yielding when the peer has a core of its own: a few
  // microseconds, about what a peer needs to answer a small message.
  static constexpr int kDefaultSpins = 256;
  // While yielding, how often slower upkeep (turning the MPI progress
  // engine, which may itself yield) is due.
  static constexpr int kUpkeepEvery = 256;
  // A wait that has yielded this long is a peer computing, not a message in
  // flight: from then on sleep, from kFirstSleep doubling to kMaxSleep. A
  // yield loop is not free when ranks share a core: CFS hands the yielder
  // slices, and a pipeline's stages computed much slower while their
  // core-mates waited by yielding. The cost: a wait
  // ends up to kMaxSleep late (more on a VM: core_sharing.hpp), only after it
  // has lasted kYieldFor; so a rank whose core nobody else needs never sleeps.
  static constexpr std::chrono::microseconds kYieldFor{1000}, kFirstSleep{20}, kMaxSleep{200};

  // Loops polling an RmaChannel's try_* calls should take channel.backoff():
  // no spins when ranks outnumber cores, sleeps only when cores are shared
  // (MpiEnv::cores_shared).
  explicit Backoff(int spins = kDefaultSpins, bool may_sleep = true) : spins_(spins), may_sleep_(may_sleep) {}

  // Call after each unsuccessful check.
  void pause() {
    ++count_;
    if (count_ <= spins_) {
      cpu_relax();
    } else if (sleep_.count() > 0) {
      std::this_thread::sleep_for(sleep_);
      sleep_ = std::min(2 * sleep_, kMaxSleep);
    } else {
      const auto now = std::chrono::steady_clock::now();
      if (count_ == spins_ + 1) yield_start_ = now;
      if (may_sleep_ && now - yield_start_ >= kYieldFor) sleep_ = kFirstSleep;
      sched_yield();
    }
  }
  // True once spinning is over.
  bool yielding() const { return count_ >= spins_; }
  // True on the first yielding check, every kUpkeepEvery-th after it, and on
  // every check once sleeping.
  bool upkeep_due() const {
    return count_ >= spins_ && (sleep_.count() > 0 || (count_ - spins_) % kUpkeepEvery == 0);
  }

 private:
  int spins_;
  bool may_sleep_;
  int count_ = 0;
  std::chrono::steady_clock::time_point yield_start_{};
  std::chrono::microseconds sleep_{0};
};

}  // namespace trillion
