// The MPI environment of one trillion process: initialisation, who is where,
// the lock that serialises MPI calls, the progress thread, and the collective
// error protocol (an error one rank meets ends the job on all ranks with
// that rank's message, never a hang; docs/rma.md, "Errors").
//
// Typical main():
//   trillion::MpiEnv env(argc, argv);
//   return trillion::run_guarded(env, [&] { ...; return 0; });
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <mpi.h>

#include "runtime/core_sharing.hpp"
#include "runtime/mpi_error.hpp"
#include "runtime/mpi_transport.hpp"

namespace trillion {

// Whether a background thread keeps MPI's progress engine turning.
//   Auto:   on when one-sided puts may move only while the target is inside
//           MPI (osc_needs_target_progress, mpi_transport.hpp): osc/pt2pt on
//           Open MPI 4.1 (RMA over TCP or tb5), osc/rdma's active-message
//           emulation between hosts on 5.0 (over btl/tcp or btl/tb5); off
//           for windows in shared memory (osc/sm, osc/rdma on one host).
//   Thread: always on.   Off: never (the caller polls between compute chunks).
// The environment variables TRILLION_MPI_PROGRESS=auto|thread|off and
// TRILLION_MPI_PROGRESS_US=<interval> override the options.
enum class Progress { Auto, Thread, Off };

struct MpiOptions {
  Progress progress = Progress::Auto;
  // How often the progress thread enters MPI when the main thread has not:
  // a rank computing outside MPI stalls its senders' flushes under osc/pt2pt
  // for as long as it computes, a progress thread for about one interval
  // (docs/rma.md, "Threads and progress").
  std::chrono::microseconds progress_interval{100};
};

class MpiEnv {
 public:
  // Calls MPI_Init_thread(MPI_THREAD_SERIALIZED): a progress thread needs more
  // than FUNNELED, and osc/pt2pt (Open MPI 4.1) and btl/tb5 reject
  // MPI_THREAD_MULTIPLE. Every MPI call therefore happens under lock(). One
  // MpiEnv per process. Installs a std::terminate handler that prints "rank R
  // (host): uncaught exception: what" and aborts the job, so even an
  // unhandled exception never hangs it.
  MpiEnv(int& argc, char**& argv, MpiOptions options = {});
  // Finalises MPI; while an exception unwinds through it, aborts the job
  // instead (a collective finalise would wait forever for the other ranks).
  ~MpiEnv();
  MpiEnv(const MpiEnv&) = delete;
  MpiEnv& operator=(const MpiEnv&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& host() const { return hosts_[size_t(rank_)]; }
  const std::string& host(int rank) const { return hosts_.at(size_t(rank)); }
  // "rank 2 (studio-c)": the prefix of every message about a rank.
  std::string where(int rank) const;
  std::string where() const { return where(rank_); }
  // Ranks sharing this rank's host, and whether they outnumber its cores
  // (then waiting ranks must yield at once rather than spin).
  int ranks_on_host() const { return ranks_on_host_; }
  bool oversubscribed() const { return oversubscribed_; }
  // The ranks on this rank's machine (the running kernel: the emulated
  // cluster's hosts are one machine) and the CPUs their affinities cover.
  const MachineShare& machine_share() const { return machine_share_; }
  // Threads each rank computes with (default 1); set before channels are made.
  void set_threads_per_rank(int threads) { threads_per_rank_ = std::max(1, threads); }
  // Whether this machine's ranks' threads outnumber its usable CPUs: then a
  // long wait must give its core up (Backoff's sleep), else it keeps polling.
  bool cores_shared() const { return machine_share_.shared(threads_per_rank_); }

  // A duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN, for trillion's own use.
  MPI_Comm comm() const { return comm_; }

  // Serialises MPI calls between the main thread and the progress thread.
  // Hold it around every MPI call; never across a long wait.
  std::unique_lock<std::mutex> lock() const { return std::unique_lock<std::mutex>(mutex_); }

  // True when one-sided operations may move only while the target is inside
  // MPI (see Progress): pollers must then call progress_locked() as they wait.
  bool needs_progress() const { return needs_progress_; }
  bool progress_thread_running() const { return progress_thread_.joinable(); }
  // The osc selection in force ("^ucx,pt2pt", "sm", "pt2pt"), for reports.
  const std::string& osc_selection() const { return osc_selection_; }

  // The MPI library ("Open MPI v5.0.7") and its generation.
  const MpiLibrary& library() const { return library_; }
  // Collective: throws the same CollectiveError on every rank when the ranks
  // run different MPI libraries (hosts with different Open MPI versions),
  // naming the first rank that differs from rank 0 and both versions. Call
  // before any weight is mapped.
  void check_same_library() const;

  // Turns MPI's progress engine once (MPI_Iprobe on a private communicator).
  // The caller holds lock().
  void progress_locked() const;

  // Collective: if any rank passes ok == false, every rank throws the same
  // CollectiveError "rank R (host): message" naming the lowest failing rank
  // (and how many others failed). Use at set-up points (files opened, memory
  // allocated, configuration agreed).
  void check_all(bool ok, std::string_view message) const;

  // Collective: what check_all learns, returned instead of thrown, for a
  // choice every rank must make alike from facts each rank knows of itself
  // (--activations auto: app/cluster.cpp). `all`: every rank passed ok; else
  // `first` is the lowest rank that did not, `message` its message (on every
  // rank) and `failed` how many did not.
  struct Vote {
    bool all = true;
    int first = -1;
    int failed = 0;
    std::string message;
  };
  Vote vote(bool ok, std::string_view message) const;

  void barrier() const;

  // Prints "rank R (host): message" to stderr and ends the whole job
  // (MPI_Abort), so peers blocked on this rank never hang.
  [[noreturn]] void abort(std::string_view message, int code = 1) const;

 private:
  void find_library_mismatch();
  void start_progress_thread(std::chrono::microseconds interval);
  void stop_progress_thread();
  void progress_loop(std::chrono::microseconds interval);

  int rank_ = 0, size_ = 1;
  std::vector<std::string> hosts_;
  int ranks_on_host_ = 1;
  bool oversubscribed_ = false;
  MachineShare machine_share_;
  int threads_per_rank_ = 1;
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm progress_comm_ = MPI_COMM_NULL;  // never carries a message; Iprobe only
  std::string osc_selection_;
  bool needs_progress_ = false;
  MpiLibrary library_;
  int mismatch_rank_ = -1;  // the first rank whose MPI library differs from rank 0's
  std::string mismatch_;
  int uncaught_at_init_ = 0;

  mutable std::mutex mutex_;
  // Steady-clock ns of the last progress_locked(): the progress thread skips
  // its turn while the main thread is already polling MPI.
  mutable std::atomic<int64_t> last_progress_ns_{0};
  std::thread progress_thread_;
  std::mutex stop_mutex_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
};

// Runs fn and returns its exit code. A CollectiveError (every rank has it) is
// printed once by rank 0 and returns 1 on all ranks; any other exception is
// printed as "rank R (host): what" and aborts the job.
int run_guarded(const MpiEnv& env, const std::function<int()>& fn);

}  // namespace trillion
