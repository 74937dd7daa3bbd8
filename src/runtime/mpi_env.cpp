#include "runtime/mpi_env.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "runtime/mpi_transport.hpp"

namespace trillion {
namespace {

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The value of Open MPI's "osc" MCA selection ("^ucx,pt2pt", "pt2pt", "sm"),
// read through the MPI tool interface; "" when unavailable. There is no
// portable way to ask which component serves a window, but the selection
// (with the Open MPI generation and the hosts) tells whether one that needs
// the target's progress can be the one (osc_needs_target_progress).
std::string read_osc_selection() {
  const auto v = mpi_control_variables({"osc"});
  return v.count("osc") ? v.at("osc") : "";
}

Progress progress_from_environment(Progress fallback) {
  const char* value = std::getenv("TRILLION_MPI_PROGRESS");
  if (!value) return fallback;
  std::string_view v(value);
  if (v == "thread") return Progress::Thread;
  if (v == "off") return Progress::Off;
  if (v == "auto") return Progress::Auto;
  throw Error("TRILLION_MPI_PROGRESS must be auto, thread or off, not '" + std::string(v) + "'");
}

// The process's MpiEnv, for the terminate handler: an exception that nobody
// catches (or a noexcept violation) must still end the job with the rank's
// message. Process-wide by nature, like std::set_terminate itself.
const MpiEnv* g_terminate_env = nullptr;
std::terminate_handler g_previous_terminate = nullptr;

[[noreturn]] void on_terminate() {
  std::string what = "std::terminate called";
  if (std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      what = std::string("uncaught exception: ") + x.what();
    } catch (...) {
      what = "uncaught exception of unknown type";
    }
  }
  if (g_terminate_env) g_terminate_env->abort(what);
  std::abort();
}

std::chrono::microseconds interval_from_environment(std::chrono::microseconds fallback) {
  const char* value = std::getenv("TRILLION_MPI_PROGRESS_US");
  if (!value) return fallback;
  char* end = nullptr;
  long us = std::strtol(value, &end, 10);
  if (end == value || *end != '\0' || us < 1 || us > 1000000)
    throw Error("TRILLION_MPI_PROGRESS_US must be microseconds in [1, 1000000], not '" + std::string(value) + "'");
  return std::chrono::microseconds(us);
}

}  // namespace

MpiEnv::MpiEnv(int& argc, char**& argv, MpiOptions options)
    : uncaught_at_init_(std::uncaught_exceptions()) {
  // Settings first: a bad one fails before MPI starts.
  const Progress mode = progress_from_environment(options.progress);
  const std::chrono::microseconds interval = interval_from_environment(options.progress_interval);
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) throw Error("MpiEnv: MPI is already initialised (one MpiEnv per process)");
  int provided = 0;
  mpi_check(MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
  // From here on errors come back as codes: mpi_check turns them into exceptions.
  mpi_check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
  mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &progress_comm_), "MPI_Comm_dup");
  mpi_check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  mpi_check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");

  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  mpi_check(MPI_Get_processor_name(name, &len), "MPI_Get_processor_name");
  std::vector<char> all(size_t(size_) * MPI_MAX_PROCESSOR_NAME);
  mpi_check(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME,
                          MPI_CHAR, comm_),
            "MPI_Allgather(hostnames)");
  for (int r = 0; r < size_; ++r) hosts_.emplace_back(&all[size_t(r) * MPI_MAX_PROCESSOR_NAME]);
  ranks_on_host_ = int(std::count(hosts_.begin(), hosts_.end(), host()));
  oversubscribed_ = unsigned(ranks_on_host_) > std::max(1u, std::thread::hardware_concurrency());
  const CoreClaim mine = this_process_claim(host());
  std::vector<CoreClaim> claims(static_cast<size_t>(size_));
  static_assert(std::is_trivially_copyable_v<CoreClaim>);
  mpi_check(MPI_Allgather(&mine, int(sizeof mine), MPI_BYTE, claims.data(), int(sizeof mine), MPI_BYTE, comm_),
            "MPI_Allgather(core claims)");
  machine_share_ = trillion::machine_share(claims, rank_);
  library_ = mpi_library();
  find_library_mismatch();

  osc_selection_ = read_osc_selection();
  const bool spans_hosts = std::count(hosts_.begin(), hosts_.end(), host()) != size_;
  needs_progress_ = osc_needs_target_progress(library_.ompi_major, osc_selection_, spans_hosts);
  bool want_thread = mode == Progress::Thread || (mode == Progress::Auto && needs_progress_);
  if (want_thread && provided < MPI_THREAD_SERIALIZED)
    throw Error(where() + ": a progress thread needs MPI_THREAD_SERIALIZED; MPI provides level " +
                std::to_string(provided));
  if (want_thread) start_progress_thread(interval);
  // Last: the handler refers to this (fully constructed) environment.
  g_terminate_env = this;
  g_previous_terminate = std::set_terminate(on_terminate);
}

MpiEnv::~MpiEnv() {
  stop_progress_thread();
  std::set_terminate(g_previous_terminate);
  g_terminate_env = nullptr;
  if (std::uncaught_exceptions() > uncaught_at_init_)
    abort("an exception escaped while MPI was running; ending the job");
  MPI_Comm_free(&progress_comm_);
  MPI_Comm_free(&comm_);
  MPI_Finalize();
}

void MpiEnv::find_library_mismatch() {
  // Fixed-size records: the version line is short ("Open MPI v5.0.7").
  constexpr size_t kLen = 128;
  std::vector<char> mine(kLen, '\0'), all(kLen * size_t(size_));
  library_.version.copy(mine.data(), kLen - 1);
  mpi_check(MPI_Allgather(mine.data(), int(kLen), MPI_CHAR, all.data(), int(kLen), MPI_CHAR, comm_),
            "MPI_Allgather(library versions)");
  const std::string first(&all[0]);
  for (int r = 1; r < size_ && mismatch_rank_ < 0; ++r) {
    const std::string other(&all[size_t(r) * kLen]);
    if (other == first) continue;
    mismatch_rank_ = r;
    mismatch_ = "runs " + other + ", but " + where(0) + " runs " + first +
                ": every host of a job must run the same Open MPI version (mpirun --version on each host)";
  }
}

void MpiEnv::check_same_library() const {
  // Every rank knows the verdict; the first rank that differs from rank 0 says it.
  check_all(rank_ != mismatch_rank_, mismatch_);
}

std::string MpiEnv::where(int rank) const { return "rank " + std::to_string(rank) + " (" + host(rank) + ")"; }

void MpiEnv::progress_locked() const {
  int flag = 0;
  MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, progress_comm_, &flag, MPI_STATUS_IGNORE);
  last_progress_ns_.store(steady_ns(), std::memory_order_relaxed);
}

void MpiEnv::check_all(bool ok, std::string_view message) const {
  const Vote v = vote(ok, message);
  if (v.all) return;
  std::string what = where(v.first) + ": " + v.message;
  if (v.failed > 1) what += " (and " + std::to_string(v.failed - 1) + " other rank(s) failed)";
  throw CollectiveError(what);
}

MpiEnv::Vote MpiEnv::vote(bool ok, std::string_view message) const {
  auto guard = lock();
  int mine[2] = {ok ? size_ : rank_, ok ? 0 : 1};
  int first = 0, failed = 0;
  mpi_check(MPI_Allreduce(&mine[0], &first, 1, MPI_INT, MPI_MIN, comm_), "MPI_Allreduce(vote)");
  if (first == size_) return Vote{};
  mpi_check(MPI_Allreduce(&mine[1], &failed, 1, MPI_INT, MPI_SUM, comm_), "MPI_Allreduce(vote)");
  std::string text = rank_ == first ? std::string(message) : std::string();
  unsigned long long length = text.size();
  mpi_check(MPI_Bcast(&length, 1, MPI_UNSIGNED_LONG_LONG, first, comm_), "MPI_Bcast(vote)");
  text.resize(size_t(length));
  mpi_check(MPI_Bcast(text.data(), int(length), MPI_CHAR, first, comm_), "MPI_Bcast(vote)");
  return Vote{false, first, failed, std::move(text)};
}

void MpiEnv::barrier() const {
  auto guard = lock();
  mpi_check(MPI_Barrier(comm_), "MPI_Barrier");
}

void MpiEnv::abort(std::string_view message, int code) const {
  std::string line = where() + ": " + std::string(message) + "\n";
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  // The progress thread may be inside MPI; MPI_THREAD_SERIALIZED forbids a
  // concurrent call, so wait for it briefly (it never holds the lock long).
  // If this thread itself holds the lock the attempt fails and we go ahead.
  for (int i = 0; i < 1000 && !mutex_.try_lock(); ++i) std::this_thread::sleep_for(std::chrono::microseconds(100));
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; be sure
}

void MpiEnv::start_progress_thread(std::chrono::microseconds interval) {
  progress_thread_ = std::thread([this, interval] { progress_loop(interval); });
}

void MpiEnv::stop_progress_thread() {
  if (!progress_thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> g(stop_mutex_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  progress_thread_.join();
}

void MpiEnv::progress_loop(std::chrono::microseconds interval) {
  const int64_t interval_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(interval).count();
  std::unique_lock<std::mutex> stop_guard(stop_mutex_);
  while (!stop_cv_.wait_for(stop_guard, interval, [this] { return stop_; })) {
    // Skip the turn while the main thread polls MPI itself.
    if (steady_ns() - last_progress_ns_.load(std::memory_order_relaxed) < interval_ns) continue;
    std::unique_lock<std::mutex> mpi(mutex_, std::try_to_lock);
    if (!mpi.owns_lock()) continue;  // the main thread is inside MPI: it progresses
    progress_locked();
  }
}

int run_guarded(const MpiEnv& env, const std::function<int()>& fn) {
  try {
    return fn();
  } catch (const CollectiveError& e) {
    if (env.rank() == 0) {
      std::fputs((std::string(e.what()) + "\n").c_str(), stderr);
      std::fflush(stderr);
    }
    return 1;
  } catch (const std::exception& e) {
    env.abort(e.what());
  } catch (...) {
    env.abort("unknown exception");
  }
}

}  // namespace trillion
