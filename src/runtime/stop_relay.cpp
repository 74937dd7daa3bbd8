#include "runtime/stop_relay.hpp"

#include <chrono>

#include "runtime/mpi_env.hpp"

namespace trillion {
namespace {
constexpr int kTagStopSignal = 1;
// How often a worker looks at its flag: well under one step of a real model.
constexpr std::chrono::milliseconds kWatchInterval{20};
}  // namespace

StopRelay::StopRelay(const MpiEnv& env, std::function<int()> local) : env_(env), local_(std::move(local)) {
  {
    auto guard = env_.lock();
    mpi_check(MPI_Comm_dup(env_.comm(), &comm_), "MPI_Comm_dup(stop relay)");
  }
  if (env_.rank() != 0) watcher_ = std::thread([this] { watch(); });
}

StopRelay::~StopRelay() {
  if (watcher_.joinable()) {
    {
      std::lock_guard<std::mutex> g(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    watcher_.join();
  }
  auto guard = env_.lock();
  MPI_Comm_free(&comm_);
}

void StopRelay::watch() {
  std::unique_lock<std::mutex> g(mutex_);
  while (!cv_.wait_for(g, kWatchInterval, [this] { return done_; })) {
    const int sig = local_();
    if (sig == 0) continue;
    auto mpi = env_.lock();
    // 4 bytes: sent eagerly, so this returns without rank 0's help; a
    // message rank 0 never reads (the run ended anyway) is harmless.
    MPI_Send(&sig, 1, MPI_INT, 0, kTagStopSignal, comm_);
    return;
  }
}

StopRelay::Stop StopRelay::poll() {
  if (seen_.signal) return seen_;
  if (const int sig = local_()) return seen_ = Stop{sig, env_.rank()};
  auto guard = env_.lock();
  int arrived = 0;
  MPI_Status status;
  if (MPI_Iprobe(MPI_ANY_SOURCE, kTagStopSignal, comm_, &arrived, &status) != MPI_SUCCESS || !arrived) return seen_;
  int sig = 0;
  mpi_check(MPI_Recv(&sig, 1, MPI_INT, status.MPI_SOURCE, kTagStopSignal, comm_, MPI_STATUS_IGNORE),
            "MPI_Recv(stop relay)");
  return seen_ = Stop{sig, status.MPI_SOURCE};
}

}  // namespace trillion
