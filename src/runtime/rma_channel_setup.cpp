// RmaChannel's set-up and teardown, done once per channel: the collective
// check of the configuration, the window's allocation, zeroing and
// passive-target epoch (MPI_Win_lock_all), and the collective free. Apart
// from the per-message exchange (rma_channel.cpp) as HPCG's SetupHalo is
// from ExchangeHalo: what every rank runs once, together, reads apart from
// the hot path that runs per message.
#include "runtime/rma_channel.hpp"

#include <cstring>
#include <exception>
#include <string>

#include "runtime/backoff.hpp"

namespace trillion {
namespace {

// Largest slot: MPI counts are int, and a slot is one put.
constexpr size_t kMaxSlotBytes = size_t(1) << 30;

}  // namespace

RmaChannel::RmaChannel(const MpiEnv& env, ChannelConfig config)
    : env_(env), config_(std::move(config)),
      layout_(env.size(), config_.slot_bytes, config_.slots_per_peer),
      uncaught_at_init_(std::uncaught_exceptions()),
      spins_(config_.spins >= 0 ? config_.spins : env.oversubscribed() ? 0 : Backoff::kDefaultSpins),
      sleeps_(env.cores_shared()) {
  const std::string what = "channel '" + config_.name + "'";
  bool valid = config_.slot_bytes >= 1 && config_.slot_bytes <= kMaxSlotBytes &&
               config_.slots_per_peer >= 1 && config_.slots_per_peer <= 65536;
  env_.check_all(valid, what + ": slot_bytes must be in [1, 1 GiB] and slots_per_peer in [1, 65536], got " +
                            std::to_string(config_.slot_bytes) + " and " +
                            std::to_string(config_.slots_per_peer));
  {
    long long mine[2] = {(long long)config_.slot_bytes, config_.slots_per_peer};
    long long lo[2], hi[2];
    auto guard = env_.lock();
    mpi_check(MPI_Allreduce(mine, lo, 2, MPI_LONG_LONG, MPI_MIN, env_.comm()), "MPI_Allreduce(channel config)");
    mpi_check(MPI_Allreduce(mine, hi, 2, MPI_LONG_LONG, MPI_MAX, env_.comm()), "MPI_Allreduce(channel config)");
    guard.unlock();
    env_.check_all(lo[0] == hi[0] && lo[1] == hi[1], what + ": ranks disagree on slot_bytes/slots_per_peer");
  }

  const size_t bytes = layout_.window_bytes();
  int rc = MPI_SUCCESS;
  {
    auto guard = env_.lock();
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "same_size", "true");
    MPI_Info_set(info, "same_disp_unit", "true");
    // Credits are MPI_MAX accumulates: their order does not matter.
    MPI_Info_set(info, "accumulate_ordering", "none");
    MPI_Info_set(info, "accumulate_ops", "same_op_no_op");
    void* base = nullptr;
    rc = MPI_Win_allocate(MPI_Aint(bytes), 1, info, env_.comm(), &base, &win_);
    MPI_Info_free(&info);
    base_ = static_cast<std::byte*>(base);
  }
  env_.check_all(rc == MPI_SUCCESS,
                 what + ": MPI_Win_allocate(" + std::to_string(bytes) + " bytes) failed: " +
                     (rc == MPI_SUCCESS ? "" : mpi_error_string(rc)) +
                     (env_.library().ompi_major == 4
                          ? " (RMA over TCP needs --mca osc pt2pt on Open MPI 4.1; see docs/rma.md)"
                          : " (see docs/rma.md)"));

  std::memset(base_, 0, bytes);  // seq 0 = empty slot, credits 0
  peers_.resize(size_t(env_.size()));
  for (auto& p : peers_) {
    p.staging.assign(size_t(config_.slots_per_peer) * staging_stride(), std::byte{0});
    p.seq_out.assign(size_t(config_.slots_per_peer), 0);
  }
  {
    auto guard = env_.lock();
    mpi_check(MPI_Win_set_errhandler(win_, MPI_ERRORS_RETURN), "MPI_Win_set_errhandler");
    // NOCHECK: nobody ever takes an exclusive lock, so no lock messages are needed.
    mpi_check(MPI_Win_lock_all(MPI_MODE_NOCHECK, win_), "MPI_Win_lock_all");
  }
  env_.barrier();  // every window zeroed before anyone puts
}

RmaChannel::~RmaChannel() {
  if (win_ == MPI_WIN_NULL) return;
  // Freeing is collective: while an exception unwinds on this rank only, the
  // others would wait forever. The job is about to abort; leave the window.
  if (std::uncaught_exceptions() > uncaught_at_init_) return;
  try {
    flush();
  } catch (const std::exception&) {  // the window goes anyway
  }
  auto guard = env_.lock();
  MPI_Win_unlock_all(win_);
  MPI_Win_free(&win_);
}

}  // namespace trillion
