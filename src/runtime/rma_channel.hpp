// RmaChannel: point-to-point messages between the ranks of an MpiEnv over MPI
// one-sided RMA — the hot-path transport of activations, routed tokens and
// sampled tokens (docs/parallel.md; docs/rma.md has the protocol, the Open
// MPI settings and measurements).
//
// Each rank exposes one window holding, per source rank, a ring of receive
// slots. send() puts header + payload into the next slot at the receiver,
// flushes, then puts the slot's sequence number (notified put); the receiver
// polls its own memory for that number and returns credits by a put into the
// sender's window. Passive target for the channel's whole life
// (MPI_Win_lock_all); no two-sided messages.
//
// Guarantees: per (sender, receiver) pair, messages arrive complete and in
// send order; a sender never overwrites an unconsumed slot (it waits for a
// credit); any size from 0 bytes up (messages larger than a slot travel as
// chunks through successive slots). Messages from different senders are not
// ordered with each other.
//
// Threads: one thread uses a channel at a time (not thread-safe); MPI calls
// take MpiEnv::lock(), so a progress thread may run beside it.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <mpi.h>

#include "runtime/backoff.hpp"
#include "runtime/mpi_env.hpp"
#include "runtime/slot_layout.hpp"

namespace trillion {

struct ChannelConfig {
  size_t slot_bytes = size_t(1) << 20;  // payload per slot; larger messages are chunked
  int slots_per_peer = 4;               // ring depth: messages/chunks in flight per pair
  std::string name = "channel";         // for error messages
  // Checks spun before a waiting rank yields its core; -1 = automatic: 0
  // when this host runs more ranks than it has cores, else Backoff's default.
  int spins = -1;
};

struct MessageInfo {
  int src = -1;
  int32_t tag = 0;     // the sender's label; not used for matching
  size_t bytes = 0;
};

struct Message {
  int src = -1;
  int32_t tag = 0;
  std::vector<std::byte> data;
};

// Counters for --metrics (bytes exchanged, time spent waiting).
struct ChannelStats {
  uint64_t messages_sent = 0, bytes_sent = 0;
  uint64_t messages_received = 0, bytes_received = 0;
  double send_wait_seconds = 0;  // waiting for credits (receiver slow or busy)
  double recv_wait_seconds = 0;  // waiting for data (sender slow or busy)
};

class RmaChannel {
 public:
  // Called by every rank of env with the same config (checked): allocates the
  // window and opens the passive-target epoch. Throws CollectiveError on all
  // ranks if any rank fails.
  RmaChannel(const MpiEnv& env, ChannelConfig config);
  // Collective (closes the epoch and frees the window) — except while an
  // exception unwinds, when the window is left to the coming MPI_Abort.
  ~RmaChannel();
  RmaChannel(const RmaChannel&) = delete;
  RmaChannel& operator=(const RmaChannel&) = delete;

  int rank() const { return env_.rank(); }
  int size() const { return env_.size(); }
  const ChannelConfig& config() const { return config_; }
  const ChannelStats& stats() const { return stats_; }
  // How loops that poll try_send/try_recv wait: as the channel's own waits
  // (ChannelConfig::spins; a long wait sleeps when MpiEnv::cores_shared()).
  Backoff backoff() const { return Backoff(spins_, sleeps_); }

  // Sends `data` to `dest` (which may be this rank). Puts straight from
  // `data` (no staging copy); returns when `data` may be reused and the
  // message is visible at dest. Blocks while dest's ring for us is full.
  void send(int dest, int32_t tag, std::span<const std::byte> data);
  // Sends only if every chunk has a free slot now; never blocks for credits.
  // (try_* calls never wait or yield: a loop polling them should call
  // sched_yield() when a round made no progress, see docs/rma.md.)
  bool try_send(int dest, int32_t tag, std::span<const std::byte> data);
  // One poll step for loops that try several peers: refresh() once, then
  // the try_*_polled calls, which make no MPI call unless they move data.
  // Over osc/pt2pt (and osc/rdma) every MPI_Win_sync turns Open MPI's progress engine, which
  // polls its sockets and yields the core (two system calls); an exchange
  // with 3 peers made 6 of them per check, and on a virtual machine whose
  // system calls cost tens of microseconds a waiting rank took most of the
  // core its computing neighbour was pinned to (docs/rma.md, "Waiting: spin, then yield").
  void refresh(bool progress = false) { sync(progress); }
  bool try_send_polled(int dest, int32_t tag, std::span<const std::byte> data);

  // Batched sending, for one message to each of several ranks (an expert
  // dispatch): post() puts a message's slots without notifying; flush()
  // completes all posted slots with one flush and then notifies them, so N
  // destinations cost one round trip instead of N over TCP. `data` must stay
  // valid and unchanged until flush(). post() blocks (after flushing what
  // is posted) only while dest's ring is full. send() flushes first.
  void post(int dest, int32_t tag, std::span<const std::byte> data);
  void flush();

  // The next message from src, if its first chunk has arrived (not consumed).
  std::optional<MessageInfo> probe(int src);
  // Blocks until a message from src arrives; returns it.
  Message recv(int src);
  // Like recv when a message from src has started to arrive; nullopt otherwise.
  std::optional<Message> try_recv(int src);
  std::optional<Message> try_recv_polled(int src);  // as try_recv, after refresh()
  // The next message from any source (sources served round-robin).
  Message recv_any();
  // Receives into out (out.size() >= the message's bytes, else throws before
  // consuming anything). Returns the message's info.
  MessageInfo recv_into(int src, std::span<std::byte> out);

  // Zero-copy receive: calls fn(info, offset, chunk) for each chunk in order,
  // with chunk pointing into the window; the slot is released when fn
  // returns. fn must not use the channel. If fn throws, the channel is left
  // mid-message and must not be used again.
  using ChunkFn = std::function<void(const MessageInfo&, size_t offset, std::span<const std::byte> chunk)>;
  MessageInfo recv_chunks(int src, const ChunkFn& fn);

 private:
  struct PeerState {
    uint64_t next_send_seq = 1;   // seq of the next slot we send to this peer
    uint64_t next_recv_seq = 1;   // seq of the next slot we expect from this peer
    uint64_t credits_reported = 0;  // slots consumed that this peer has been told of
    uint64_t credit_out = 0;        // origin buffer of the credit put (must outlive it)
    // Origin buffers of slot puts, one per slot: the header, then (for
    // payloads up to kInlineBytes) a copy of the payload, so a small message
    // is one put instead of two.
    std::vector<std::byte> staging;
    std::vector<uint64_t> seq_out;       // origin buffers of seq puts, per slot
  };

  static constexpr size_t kInlineBytes = 4096;
  size_t staging_stride() const { return sizeof(SlotHeader) + std::min(config_.slot_bytes, kInlineBytes); }

  void check_peer(int peer, const char* what) const;
  std::byte* local(size_t offset) const { return base_ + offset; }
  // One poll step: MPI_Win_sync (and progress when the transport needs it).
  void sync(bool progress);
  uint64_t credits_from(int dest) const;  // slots of ours dest has consumed
  uint64_t free_slots(int dest) const;
  void wait_for_credit(int dest);
  // Puts one chunk's header and payload into dest's next slot; the
  // notification waits in pending_ for flush().
  void put_slot(int dest, int32_t tag, std::span<const std::byte> data, uint64_t chunk, uint64_t chunks);
  void send_chunks(int dest, int32_t tag, std::span<const std::byte> data);
  bool send_if_room(int dest, int32_t tag, std::span<const std::byte> data);  // peer already checked

  const SlotHeader* arrived(int src) const;  // next slot from src, if its seq is there
  const SlotHeader& wait_slot(int src);
  void release_slot(int src);
  void report_credits(int src);
  void report_all_credits();
  MessageInfo consume(int src, const SlotHeader& first, const ChunkFn& fn);
  Message take(int src, const SlotHeader& first);  // consume into a new Message
  MessageInfo info_of(int src, const SlotHeader& h) const;

  const MpiEnv& env_;
  ChannelConfig config_;
  SlotLayout layout_;
  MPI_Win win_ = MPI_WIN_NULL;
  std::byte* base_ = nullptr;
  std::vector<PeerState> peers_;
  struct Pending {
    int dest;
    uint64_t seq;
  };
  std::vector<Pending> pending_;  // slots put but not yet notified
  int next_any_ = 0;  // recv_any's round-robin start
  ChannelStats stats_;
  int uncaught_at_init_ = 0;
  int spins_ = 0;
  bool sleeps_ = true;
};

}  // namespace trillion
