// The reliability engine: reliable, ordered messages of any length over a
// Link's unreliable frames.
//
// Per peer and direction: frames are counted in 64 bits (the low 32 bits
// travel as the sequence number, so nothing derived from a count jumps when
// the wire number wraps at 2^32); the receiver acknowledges cumulatively
// plus a selective bitmap of the 64 frames after, on every frame it sends
// and in an ack frame at the end of a progress call that received data; the
// sender keeps at most `window` frames unacknowledged and never more than
// the receiver's advertised credit (its reorder buffer, and on verbs its
// posted receives); the receiver buffers frames that arrive early
// (reordering) and drops those it has seen (duplicates); messages longer
// than a frame are cut into fragments and reassembled in order, except
// puts, whose fragments the receiver copies straight to the address the put
// names (put()).
//
// Acknowledgements ride on data; a frame of its own (a datagram each way
// through the kernel: a third of a transfer's cost when sent per frame) goes
// at the end of a progress call only when something is out of order or
// duplicated, a quarter of the window waits for one, or the oldest
// unacknowledged frame arrived ack_delay ago.
//
// Loss repair, fastest first: a frame is resent as soon as the selective
// acks show that a frame transmitted after it arrived and a reordering
// allowance (a quarter round trip) has passed (RACK, RFC 8985); when the
// acknowledgements stop while frames are out, the newest is resent after two
// round trips, so a lost tail gets acknowledgements that say what else is
// missing (a tail loss probe); and a frame not acknowledged within its
// timeout is sent again, the timeout doubling per try up to rto_max.
//
// Liveness: send_heartbeats() (a thread, so a busy rank still looks alive)
// sends each peer a heartbeat; a peer heard from by no frame for
// peer_timeout seconds is declared dead (on_dead), once; a peer that said
// bye (close()) is never declared dead.
//
// Designed after the ideas of Open MPI's btl/usnic (sliding window with
// piggy-backed acks over unreliable frames) and TCP's RACK/TLP; own code,
// kept free of Open MPI so it is unit-tested alone (tests/transport).
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "transport/tb5/core/frame.hpp"
#include "transport/tb5/core/link.hpp"

namespace trillion::tb5 {

struct EngineConfig {
  uint32_t window = 32;        // frames in flight per peer (<= 64: the sack bitmap)
  double rto = 0.002;          // first retransmission timeout, seconds
  double rto_max = 0.2;        // the backoff stops doubling here
  double heartbeat = 0.5;      // seconds between heartbeats (the caller's thread)
  double peer_timeout = 10.0;  // silence after which a peer is dead
  uint32_t initial_seq = 0;    // first sequence number each way (both ends alike; tests start near 2^32)
  double ack_delay = 50e-6;    // longest a received frame waits for its acknowledgement (see below)
  // send_borrowed copies messages shorter than this: by default all. Open
  // MPI's ob1 keeps pml_ob1_send_pipeline_depth (3) fragments of a message
  // in flight and sends the next when one completes; a borrowed fragment
  // completes a round trip later (its last frame asks for an immediate
  // acknowledgement), so the pipe runs dry: measured, about half the
  // bandwidth of copying and completing at once for 4 MiB messages.
  // Borrowing pays where the caller allows more in flight.
  size_t borrow_min = SIZE_MAX;
  // Whether frame checksums cover payloads: 1 yes, 0 no, -1 unless the link
  // checks them itself (Link::checks_payload: udp). Hashing 64 KiB frames
  // at both ends cost udp ~15% of its bandwidth on loopback. Each frame says
  // which it is, so ends that differ still understand each other.
  int payload_hash = -1;
};

struct EngineStats {
  uint64_t messages_sent = 0, messages_delivered = 0;
  uint64_t frames_sent = 0, retransmissions = 0, acks_sent = 0;
  uint64_t duplicates_dropped = 0, out_of_window = 0, bad_frames = 0, reordered = 0;
  // Of the retransmissions: repaired from selective acks, tail probes, timeouts.
  uint64_t fast_retransmits = 0, probes = 0, timeouts = 0;
  uint64_t puts_placed = 0;  // puts whose bytes this engine wrote into its process's memory
};

class Engine {
 public:
  using Clock = std::function<double()>;  // seconds, monotonic
  using Deliver = std::function<void(uint32_t peer, uint8_t tag, std::span<const uint8_t> message)>;
  using PeerDead = std::function<void(uint32_t peer, double silent_seconds)>;
  using Sent = std::function<void(void* cookie)>;

  Engine(Link& link, uint32_t self, uint32_t nranks, EngineConfig cfg, Deliver deliver, PeerDead on_dead,
         Clock clock = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  void add_peer(uint32_t peer);
  // Queues a message made of the concatenated pieces (copied once, into a
  // buffer kept until every frame is acknowledged: the caller's buffers are
  // free on return) and sends what the window allows.
  void send(uint32_t peer, uint8_t tag, std::span<const std::span<const uint8_t>> pieces);
  // The same without the copy: frames are sent from the pieces (at most 2),
  // which the caller keeps unchanged until on_sent(cookie) says every frame
  // was acknowledged (called from progress()). False if the message was
  // copied instead (more pieces, a peer gone, or under cfg.borrow_min
  // bytes): the pieces are free now.
  bool send_borrowed(uint32_t peer, uint8_t tag, std::span<const std::span<const uint8_t>> pieces, void* cookie);
  void set_on_sent(Sent on_sent) { on_sent_ = std::move(on_sent); }
  // Writes `data` into the peer's memory at `remote_addr`, an address in the
  // peer's process (the BTL's put, as RDMA would do it): the frames carry
  // the address, and the receiver copies each fragment straight to its place
  // (no reassembly buffer) and delivers nothing. Borrowed like
  // send_borrowed: `data` stays untouched until on_sent(cookie), which says
  // every frame was acknowledged, i.e. the bytes are in place at the peer.
  // False if the peer is gone (nothing sent, no on_sent).
  bool put(uint32_t peer, uint64_t remote_addr, std::span<const uint8_t> data, void* cookie);
  // Receives, delivers, acknowledges, retransmits, checks liveness; returns
  // the number of frames received plus messages delivered. Deliver and
  // on_dead are called from here (never re-entered: a nested call returns 0);
  // Deliver may call send(). A message is delivered straight from the
  // link's receive buffer when it fits one frame that arrived in order.
  int progress();
  // Thread-safe: one heartbeat to each peer.
  void send_heartbeats();
  // Progresses until every message sent is acknowledged (or its peer closed
  // or dead) or `timeout` seconds pass; true if everything was acknowledged.
  bool flush(double timeout);
  // Says bye to every peer, in 5 rounds over ~0.1 s with the link polled
  // between them (a bye is not retransmitted; a link may hold frames).
  void close();
  bool all_acknowledged() const;
  // What this engine knows of `peer`, for the message that declares it dead:
  // whether anything still arrives (from it, from anyone), what is owed.
  std::string peer_report(uint32_t peer) const;
  // The largest payload of one frame (to any peer / to `peer`).
  size_t max_payload() const { return link_.mtu() - frame_header_size_; }
  size_t max_payload(uint32_t peer) const { return link_.frame_size(peer) - frame_header_size_; }
  EngineStats stats() const { return stats_; }
  const EngineConfig& config() const { return cfg_; }

 private:
  struct Peer;
  void on_frame(std::span<const uint8_t> bytes);
  void queue(uint32_t peer, Peer& p, uint8_t tag, size_t total, FrameType type = FrameType::data);
  void take_ack(Peer& p, uint32_t ack, uint64_t sack, uint32_t window);
  void take_data(Peer& p, uint32_t src, const struct FrameHeader& h, std::span<const uint8_t> payload);
  void consume(Peer& p, uint32_t src, const struct FrameHeader& h, std::span<const uint8_t> payload);
  void place(Peer& p, uint32_t src, const struct FrameHeader& h, std::span<const uint8_t> payload);
  void pump(uint32_t peer, Peer& p, double now);
  void send_control(uint32_t peer, Peer& p, uint8_t type);
  uint64_t sack_bits(const Peer& p) const;

  static constexpr size_t frame_header_size_ = 48;
  Link& link_;
  uint32_t self_;
  EngineConfig cfg_;
  Deliver deliver_;
  PeerDead on_dead_;
  Sent on_sent_;
  std::vector<void*> sent_;  // borrowed messages acknowledged in this progress call
  Clock clock_;
  std::vector<std::unique_ptr<Peer>> peers_;
  bool hash_payloads_ = true;  // cfg_.payload_hash resolved against the link
  bool in_progress_ = false;
  double now_ = 0;             // the clock at the start of this progress call
  double last_frame_any_ = 0;  // when any valid frame last arrived
  uint64_t delivered_now_ = 0;  // messages delivered in this progress call
  uint64_t xmit_count_ = 0;     // transmissions so far: orders them for RACK
  EngineStats stats_;
};

}  // namespace trillion::tb5
