// The spin-wait hint: lets a waiting hardware thread yield its core's
// pipeline (x86 PAUSE, arm64 YIELD) without giving up the core.
#pragma once

namespace trillion {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace trillion
