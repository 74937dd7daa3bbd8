// RmaChannel's exchange, per message: sending (waiting for credits, putting
// slots, the notifications after one flush) and receiving (polling the ring
// for the next sequence number, chunks, reporting credits back). The
// window's set-up and teardown, done once, are in rma_channel_setup.cpp.
#include "runtime/rma_channel.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>

#include "runtime/backoff.hpp"

namespace trillion {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Window cells written by remote puts and polled locally: read with acquire
// so the payload read after the sequence number is the payload put before it.
uint64_t load_acquire(const std::byte* p) {
  return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(const_cast<std::byte*>(p)))
      .load(std::memory_order_acquire);
}

const std::byte* payload_of(const SlotHeader& h) {
  return reinterpret_cast<const std::byte*>(&h) + sizeof(SlotHeader);
}

}  // namespace

void RmaChannel::check_peer(int peer, const char* what) const {
  if (peer < 0 || peer >= env_.size())
    throw Error(env_.where() + ": channel '" + config_.name + "': " + what + " rank " + std::to_string(peer) +
                " out of range [0, " + std::to_string(env_.size()) + ")");
}

void RmaChannel::sync(bool progress) {
  // Over osc/pt2pt (Open MPI 4.1), or osc/rdma's active messages between
  // hosts (5.0), puts land only while we are inside MPI: turn the engine
  // on every check. Otherwise only now and then (a safety net for
  // components that need it): with ranks > cores, Open MPI's progress
  // engine yields the core itself, which doubled hop latency when called on
  // every check.
  auto guard = env_.lock();
  // Unified memory model (all Open MPI components here), but MPI_Win_sync is
  // the portable way to see remote puts in our own window memory.
  MPI_Win_sync(win_);
  if (progress || env_.needs_progress()) env_.progress_locked();
}

// ---- sending ---------------------------------------------------------------

uint64_t RmaChannel::credits_from(int dest) const { return load_acquire(local(layout_.credit_offset(dest))); }

uint64_t RmaChannel::free_slots(int dest) const {
  uint64_t in_flight = (peers_[size_t(dest)].next_send_seq - 1) - credits_from(dest);
  return uint64_t(config_.slots_per_peer) - in_flight;
}

void RmaChannel::wait_for_credit(int dest) {
  if (free_slots(dest) > 0) return;
  if (dest == env_.rank()) {
    report_credits(dest);  // our own consumed slots
    if (free_slots(dest) > 0) return;
    throw Error(env_.where() + ": channel '" + config_.name +
                "': send to self would block forever (ring full; receive first)");
  }
  const auto start = Clock::now();
  Backoff backoff = this->backoff();
  bool reported = false;
  for (;;) {
    sync(backoff.upkeep_due());
    if (free_slots(dest) > 0) break;
    if (backoff.yielding() && !reported) {
      // Idle anyway: tell our senders what we consumed, in case they in turn
      // wait for us (two ranks sending to each other).
      report_all_credits();
      reported = true;
    }
    backoff.pause();
  }
  stats_.send_wait_seconds += seconds_since(start);
}

void RmaChannel::put_slot(int dest, int32_t tag, std::span<const std::byte> data, uint64_t chunk,
                          uint64_t chunks) {
  PeerState& p = peers_[size_t(dest)];
  const uint64_t seq = p.next_send_seq++;
  const size_t k = size_t((seq - 1) % uint64_t(config_.slots_per_peer));
  const size_t begin = size_t(chunk) * config_.slot_bytes;
  const size_t n = std::min(config_.slot_bytes, data.size() - std::min(data.size(), begin));
  std::byte* stage = p.staging.data() + k * staging_stride();
  const SlotHeader h{seq, tag, uint32_t(chunk), chunks, data.size(), n, {}};
  std::memcpy(stage, &h, sizeof h);
  const bool inline_payload = n <= kInlineBytes;
  if (inline_payload && n > 0) std::memcpy(stage + sizeof h, data.data() + begin, n);
  p.seq_out[k] = seq;
  const MPI_Aint at = MPI_Aint(layout_.slot_offset(env_.rank(), seq));
  constexpr size_t skip = sizeof(uint64_t);  // the seq word goes last, by itself
  const int first_bytes = int(sizeof h - skip + (inline_payload ? n : 0));

  auto guard = env_.lock();
  mpi_check(MPI_Put(stage + skip, first_bytes, MPI_BYTE, dest, at + MPI_Aint(skip), first_bytes, MPI_BYTE, win_),
            "MPI_Put(slot)");
  if (!inline_payload)
    mpi_check(MPI_Put(data.data() + begin, int(n), MPI_BYTE, dest, at + MPI_Aint(sizeof h), int(n), MPI_BYTE, win_),
              "MPI_Put(slot payload)");
  pending_.push_back({dest, seq});
}

void RmaChannel::flush() {
  if (pending_.empty()) return;
  const int one = pending_.front().dest;
  const bool single = std::all_of(pending_.begin(), pending_.end(), [&](const Pending& q) { return q.dest == one; });
  auto guard = env_.lock();
  // Headers and payloads complete at their targets before any notification
  // (one flush_all lets osc/pt2pt wait for all targets' acks at once).
  mpi_check(single ? MPI_Win_flush(one, win_) : MPI_Win_flush_all(win_), "MPI_Win_flush(slots)");
  for (const Pending& q : pending_) {
    PeerState& p = peers_[size_t(q.dest)];
    const size_t k = size_t((q.seq - 1) % uint64_t(config_.slots_per_peer));
    mpi_check(MPI_Put(&p.seq_out[k], 1, MPI_UINT64_T, q.dest, MPI_Aint(layout_.slot_offset(env_.rank(), q.seq)), 1,
                      MPI_UINT64_T, win_),
              "MPI_Put(slot seq)");
  }
  // Local completion is enough: nothing is ordered after a notification
  // except a reuse of its slot, which waits for the receiver's credit (so
  // the receiver has seen it). The next flush to dest completes it anyway.
  mpi_check(single ? MPI_Win_flush_local(one, win_) : MPI_Win_flush_local_all(win_),
            "MPI_Win_flush_local(slot seqs)");
  pending_.clear();
}

void RmaChannel::send_chunks(int dest, int32_t tag, std::span<const std::byte> data) {
  flush();  // earlier posts first
  const uint64_t chunks = layout_.chunks(data.size());
  for (uint64_t c = 0; c < chunks; ++c) {
    wait_for_credit(dest);
    put_slot(dest, tag, data, c, chunks);
    flush();  // notify chunk by chunk: the receiver copies one while the next travels
  }
  stats_.messages_sent += 1;
  stats_.bytes_sent += data.size();
}

void RmaChannel::post(int dest, int32_t tag, std::span<const std::byte> data) {
  check_peer(dest, "send to");
  const uint64_t chunks = layout_.chunks(data.size());
  for (uint64_t c = 0; c < chunks; ++c) {
    if (free_slots(dest) == 0) {
      flush();  // the receiver can only free slots it has been told about
      wait_for_credit(dest);
    }
    put_slot(dest, tag, data, c, chunks);
  }
  stats_.messages_sent += 1;
  stats_.bytes_sent += data.size();
}

void RmaChannel::send(int dest, int32_t tag, std::span<const std::byte> data) {
  check_peer(dest, "send to");
  if (dest == env_.rank()) {
    // Only this rank could drain its own ring: refuse what cannot fit now
    // rather than hang (or leave half a message behind).
    report_credits(dest);
    if (free_slots(dest) < layout_.chunks(data.size()))
      throw Error(env_.where() + ": channel '" + config_.name + "': a " + std::to_string(data.size()) +
                  "-byte send to self does not fit the free slots; receive first");
  }
  send_chunks(dest, tag, data);
}

bool RmaChannel::try_send(int dest, int32_t tag, std::span<const std::byte> data) {
  check_peer(dest, "send to");
  if (free_slots(dest) < layout_.chunks(data.size())) sync(false);
  return send_if_room(dest, tag, data);
}

bool RmaChannel::try_send_polled(int dest, int32_t tag, std::span<const std::byte> data) {
  check_peer(dest, "send to");
  return send_if_room(dest, tag, data);
}

bool RmaChannel::send_if_room(int dest, int32_t tag, std::span<const std::byte> data) {
  const uint64_t chunks = layout_.chunks(data.size());
  if (free_slots(dest) < chunks) {
    if (dest == env_.rank()) report_credits(dest);
    if (free_slots(dest) < chunks) return false;
  }
  send_chunks(dest, tag, data);
  return true;
}

// ---- receiving -------------------------------------------------------------

const SlotHeader* RmaChannel::arrived(int src) const {
  const uint64_t expected = peers_[size_t(src)].next_recv_seq;
  const std::byte* slot = local(layout_.slot_offset(src, expected));
  const uint64_t seq = load_acquire(slot);
  if (seq == expected) return reinterpret_cast<const SlotHeader*>(slot);
  if (seq > expected)  // a sender overran its credits: a protocol bug, never silent
    throw Error(env_.where() + ": channel '" + config_.name + "': slot from rank " + std::to_string(src) +
                " holds seq " + std::to_string(seq) + ", expected " + std::to_string(expected));
  return nullptr;
}

const SlotHeader& RmaChannel::wait_slot(int src) {
  sync(false);
  if (const SlotHeader* h = arrived(src)) return *h;
  const auto start = Clock::now();
  Backoff backoff = this->backoff();
  bool reported = false;
  for (;;) {
    backoff.pause();
    sync(backoff.upkeep_due());
    if (const SlotHeader* h = arrived(src)) {
      stats_.recv_wait_seconds += seconds_since(start);
      return *h;
    }
    if (backoff.yielding() && !reported) {
      report_all_credits();  // idle: let senders refill the rings we drained
      reported = true;
    }
  }
}

void RmaChannel::report_credits(int src) {
  PeerState& p = peers_[size_t(src)];
  const uint64_t consumed = p.next_recv_seq - 1;
  if (consumed == p.credits_reported) return;
  p.credit_out = consumed;
  auto guard = env_.lock();
  // MPI_MAX, not a put: puts to one location are unordered, so an older
  // (smaller) count could land after a newer one and lose credits; MAX makes
  // arrival order irrelevant, so local completion suffices (no round trip).
  mpi_check(MPI_Accumulate(&p.credit_out, 1, MPI_UINT64_T, src, MPI_Aint(layout_.credit_offset(env_.rank())), 1,
                           MPI_UINT64_T, MPI_MAX, win_),
            "MPI_Accumulate(credit)");
  mpi_check(MPI_Win_flush_local(src, win_), "MPI_Win_flush_local(credit)");
  p.credits_reported = consumed;
}

void RmaChannel::report_all_credits() {
  for (int r = 0; r < env_.size(); ++r) report_credits(r);
}

void RmaChannel::release_slot(int src) {
  PeerState& p = peers_[size_t(src)];
  ++p.next_recv_seq;
  // Batch credits: one accumulate per half ring (and whenever we go idle).
  // Deadlock-free because a blocked sender has a full ring here; once we
  // drained it, consumed - reported is the whole ring >= the threshold.
  const uint64_t threshold = uint64_t(std::max(1, config_.slots_per_peer / 2));
  if (p.next_recv_seq - 1 - p.credits_reported >= threshold) report_credits(src);
}

MessageInfo RmaChannel::info_of(int src, const SlotHeader& h) const {
  const uint64_t expected_chunks = layout_.chunks(size_t(h.message_bytes));
  if (h.chunk != 0 || h.chunks != expected_chunks ||
      h.chunk_bytes != std::min<uint64_t>(h.message_bytes, config_.slot_bytes))
    throw Error(env_.where() + ": channel '" + config_.name + "': corrupt first slot from rank " +
                std::to_string(src));
  return MessageInfo{src, h.tag, size_t(h.message_bytes)};
}

MessageInfo RmaChannel::consume(int src, const SlotHeader& first, const ChunkFn& fn) {
  const MessageInfo info = info_of(src, first);
  const uint64_t chunks = first.chunks;
  size_t offset = 0;
  const SlotHeader* h = &first;
  for (uint64_t c = 0; c < chunks; ++c) {
    if (c > 0) {
      h = &wait_slot(src);
      if (h->chunk != c || h->chunks != chunks || h->message_bytes != info.bytes || h->tag != info.tag)
        throw Error(env_.where() + ": channel '" + config_.name + "': chunk " + std::to_string(c) +
                    " from rank " + std::to_string(src) + " does not continue its message");
    }
    fn(info, offset, std::span<const std::byte>(payload_of(*h), size_t(h->chunk_bytes)));
    offset += size_t(h->chunk_bytes);
    release_slot(src);
  }
  stats_.messages_received += 1;
  stats_.bytes_received += info.bytes;
  return info;
}

std::optional<MessageInfo> RmaChannel::probe(int src) {
  check_peer(src, "probe");
  sync(false);
  if (const SlotHeader* h = arrived(src)) return info_of(src, *h);
  return std::nullopt;
}

MessageInfo RmaChannel::recv_chunks(int src, const ChunkFn& fn) {
  check_peer(src, "receive from");
  return consume(src, wait_slot(src), fn);
}

MessageInfo RmaChannel::recv_into(int src, std::span<std::byte> out) {
  check_peer(src, "receive from");
  const SlotHeader& first = wait_slot(src);
  if (out.size() < first.message_bytes)
    throw Error(env_.where() + ": channel '" + config_.name + "': message of " +
                std::to_string(first.message_bytes) + " bytes from rank " + std::to_string(src) +
                " does not fit a " + std::to_string(out.size()) + "-byte buffer");
  return consume(src, first, [&](const MessageInfo&, size_t offset, std::span<const std::byte> chunk) {
    if (!chunk.empty()) std::memcpy(out.data() + offset, chunk.data(), chunk.size());
  });
}

// Copies the message that starts at `first` out of the ring (recv and
// try_recv_polled differ only in how they find `first`).
Message RmaChannel::take(int src, const SlotHeader& first) {
  Message m;
  m.data.resize(size_t(first.message_bytes));
  const MessageInfo info = consume(src, first, [&](const MessageInfo&, size_t offset, std::span<const std::byte> c) {
    if (!c.empty()) std::memcpy(m.data.data() + offset, c.data(), c.size());
  });
  m.src = info.src;
  m.tag = info.tag;
  return m;
}

Message RmaChannel::recv(int src) {
  check_peer(src, "receive from");
  return take(src, wait_slot(src));
}

std::optional<Message> RmaChannel::try_recv(int src) {
  check_peer(src, "receive from");
  sync(false);
  return try_recv_polled(src);
}

std::optional<Message> RmaChannel::try_recv_polled(int src) {
  check_peer(src, "receive from");
  const SlotHeader* first = arrived(src);
  if (!first) return std::nullopt;
  return take(src, *first);
}

Message RmaChannel::recv_any() {
  const int n = env_.size();
  const auto start = Clock::now();
  Backoff backoff = this->backoff();
  bool waited = false, reported = false;
  for (;;) {
    sync(backoff.upkeep_due());
    for (int i = 0; i < n; ++i) {
      const int src = (next_any_ + i) % n;
      if (arrived(src)) {
        next_any_ = (src + 1) % n;
        if (waited) stats_.recv_wait_seconds += seconds_since(start);
        return recv(src);
      }
    }
    waited = true;
    if (backoff.yielding() && !reported) {
      report_all_credits();
      reported = true;
    }
    backoff.pause();
  }
}

}  // namespace trillion