// Waiting without burning the core a peer needs. With more ranks than cores
// (4 ranks on 2 cores here, or a rank's compute threads on all cores of a
// Mac Studio) a pure spin costs a scheduler slice per hop (2-7 ms measured,
// ENVIRONMENT.md) and usleep costs 40-100 us; spinning briefly and then
// calling sched_yield costs ~2 us per hop.
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
  // Checks spun before yielding: a few microseconds, the time a peer on
  // another core needs to answer a small message.
  static constexpr int kDefaultSpins = 256;

  explicit Backoff(int spins = kDefaultSpins) : spins_(spins) {}

  // Call after each unsuccessful check.
  void pause() {
    if (count_ < spins_) {
      ++count_;
      cpu_relax();
    } else {
      sched_yield();
    }
  }
  // True once spinning is over: a good moment for slower work (turning the
  // MPI progress engine, returning credits).
  bool yielding() const { return count_ >= spins_; }

 private:
  int spins_;
  int count_ = 0;
};

}  // namespace trillion
