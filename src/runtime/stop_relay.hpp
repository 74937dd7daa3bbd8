// Carries a stop request from any rank to rank 0, which runs the scheduler.
// mpirun and Slurm signal every rank, but `kill -TERM` of one worker (or a
// node's own shutdown) reaches only that rank: its signal handler merely
// records the signal (common/interrupt.hpp) and the worker keeps serving, so
// a watcher thread here sends the signal number to rank 0 on a private
// communicator; rank 0's poll() sees it between steps and stops the whole
// job through the normal stop protocol. Two-sided and tiny on purpose: the
// message is eager (no progress needed at the sender) and rank 0 probes it
// once per step.
#pragma once
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include <mpi.h>

namespace trillion {

class MpiEnv;

class StopRelay {
 public:
  // Collective (duplicates the communicator). `local` returns this rank's
  // recorded stop signal, 0 if none.
  StopRelay(const MpiEnv& env, std::function<int()> local);
  ~StopRelay();  // stops the watcher, frees the communicator (before MPI_Finalize)
  StopRelay(const StopRelay&) = delete;
  StopRelay& operator=(const StopRelay&) = delete;

  struct Stop {
    int signal = 0;  // 0: no stop requested
    int rank = 0;    // the rank that received it
  };
  // Rank 0: this rank's signal, else the first one a worker relayed. Cheap
  // (one MPI_Iprobe); a stop once seen stays.
  Stop poll();

 private:
  void watch();

  const MpiEnv& env_;
  std::function<int()> local_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  Stop seen_;
  std::thread watcher_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
};

}  // namespace trillion
