// A graceful stop on SIGINT (Ctrl-C), SIGTERM (Slurm's scancel, a job's
// time limit, mpirun ending the job) and SIGUSR1 (a stop asked for ahead of
// time: mpirun forwards it with no kill deadline): the handler only records the signal
// (async-signal-safe); the batch loop on rank 0 polls stop_signal() between
// steps, writes what finished and exits non-zero with a resume hint. A
// second signal of either kind ends the process at once, by that signal.
// Process-wide by nature, like the signal dispositions themselves.
#pragma once
#include <string>

namespace trillion {

// Installs the handlers for SIGINT, SIGTERM and SIGUSR1 (again: no effect), and
// ignores SIGXFSZ (a write past `ulimit -f` fails with EFBIG instead).
void install_stop_handlers();
// The first SIGINT/SIGTERM/SIGUSR1 received (or request_stop()ped), 0 if none.
int stop_signal();
// Records `sig` as if it had arrived (a stop relayed from another rank; tests).
void request_stop(int sig);
// "SIGTERM", "SIGINT", "SIGUSR1", else "signal N".
std::string signal_name(int sig);
// The shell's convention for a job ended by `sig`: 128 + sig (130, 143).
inline int exit_code_for(int sig) { return 128 + sig; }

}  // namespace trillion
