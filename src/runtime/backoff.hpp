// Waiting without burning the core a peer needs. With more ranks than cores
// (4 ranks on 2 cores here) a pure spin costs a scheduler slice per hop (2-7
// ms, ENVIRONMENT.md) and usleep 40-100 us. Spinning briefly then calling
// sched_yield is right when a core is free for the peer; when ranks
// outnumber cores, yielding at once is best (measured in docs/RMA.md: a
// 4-rank ring on 2 cores, 256 spins ~15-37 us per hop, 0 spins ~4-10 us,
// MPI_Send/Recv ~4-9 us).
#pragma once
#include <sched.h>

namespace trillion {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

class Backoff {
 public:
  // Checks spun before yielding when the peer has a core of its own: a few
  // microseconds, about what a peer needs to answer a small message.
  static constexpr int kDefaultSpins = 256;
  // While yielding, how often slower upkeep (turning the MPI progress
  // engine, which may itself yield) is due.
  static constexpr int kUpkeepEvery = 256;

  // Loops polling an RmaChannel's try_* calls should pass channel.spins(),
  // which is 0 when ranks outnumber cores.
  explicit Backoff(int spins = kDefaultSpins) : spins_(spins) {}

  // Call after each unsuccessful check.
  void pause() {
    ++count_;
    if (count_ <= spins_)
      cpu_relax();
    else
      sched_yield();
  }
  // True once spinning is over.
  bool yielding() const { return count_ >= spins_; }
  // True on the first yielding check and every kUpkeepEvery-th after it.
  bool upkeep_due() const { return count_ >= spins_ && (count_ - spins_) % kUpkeepEvery == 0; }

 private:
  int spins_;
  int count_ = 0;
};

}  // namespace trillion
