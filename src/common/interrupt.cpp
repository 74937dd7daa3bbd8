#include "common/interrupt.hpp"

#include <atomic>
#include <csignal>

namespace trillion {
namespace {

// Lock-free, so reading and writing it from a handler is safe.
std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_stop_signal(int sig) {
  int none = 0;
  if (!g_stop_signal.compare_exchange_strong(none, sig)) {
    // The second signal: the user insists. Die by it (default action).
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
}

}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // blocking calls (file reads, MPI's sockets) resume rather than fail with EINTR
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  // SIGUSR1: the same stop, asked for ahead of time. mpirun forwards it to
  // every rank without the SIGTERM-then-SIGKILL deadline it imposes on its
  // own termination, and Slurm sends it before a time limit with
  // `--signal=B:USR1@SECONDS`, so a long step still finishes and is written.
  sigaction(SIGUSR1, &sa, nullptr);
  // A file size limit (ulimit -f) then fails a write with EFBIG, which the
  // writers report and recover from, instead of killing the rank.
  std::signal(SIGXFSZ, SIG_IGN);
}

int stop_signal() { return g_stop_signal.load(); }

void request_stop(int sig) {
  int none = 0;
  g_stop_signal.compare_exchange_strong(none, sig);
}

std::string signal_name(int sig) {
  if (sig == SIGINT) return "SIGINT";
  if (sig == SIGTERM) return "SIGTERM";
  if (sig == SIGUSR1) return "SIGUSR1";
  return "signal " + std::to_string(sig);
}

}  // namespace trillion
