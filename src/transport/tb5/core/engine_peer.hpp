// The engine's state per peer (engine.cpp: sending, progress, liveness;
// engine_recv.cpp: receiving). Internal to the engine.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "transport/tb5/core/engine.hpp"
#include "transport/tb5/core/frame.hpp"
#include "transport/tb5/core/ring.hpp"

namespace trillion::tb5 {
namespace engine_detail {

// A byte buffer that keeps its capacity and is never zero-filled (a
// std::vector's resize() would write every byte before the copy does).
struct Buffer {
  std::unique_ptr<uint8_t[]> bytes;
  size_t cap = 0, len = 0;
  void reset(size_t need) {
    if (need > cap) bytes.reset(new uint8_t[cap = std::max(need, 2 * cap)]);
    len = 0;
  }
  void append(std::span<const uint8_t> s) {
    if (!s.empty()) std::memcpy(bytes.get() + len, s.data(), s.size());
    len += s.size();
  }
  std::span<const uint8_t> view(size_t off, size_t n) const { return {bytes.get() + off, n}; }
};

// A message being sent: its bytes, copied (owned) or borrowed from the
// caller until acknowledged (piece[0] then piece[1]).
struct OutMsg {
  Buffer owned;
  std::span<const uint8_t> piece[2];
  void* cookie = nullptr;  // borrowed: handed to on_sent once acknowledged
  // Bytes off .. off+n as at most two spans.
  std::pair<std::span<const uint8_t>, std::span<const uint8_t>> view(size_t off, size_t n) const {
    const size_t first = piece[0].size();
    if (off >= first) return {piece[1].subspan(off - first, n), {}};
    if (off + n <= first) return {piece[0].subspan(off, n), {}};
    return {piece[0].subspan(off), piece[1].first(off + n - first)};
  }
};

}  // namespace engine_detail

struct Engine::Peer {
  using Buffer = engine_detail::Buffer;
  using OutMsg = engine_detail::OutMsg;
  std::atomic<bool> active{false}, closed{false};
  bool dead = false;
  double last_heard = 0;
  uint64_t frames_heard = 0;                // for peer_report
  std::atomic<uint64_t> heartbeats_sent{0};  // by the heartbeat thread

  // Sending. Frames base .. base+out.size()-1 (64-bit counts); the first
  // `transmitted` have gone out at least once. A message's bytes stay in
  // `msgs` until its last frame is acknowledged.
  struct OutFrame {
    uint8_t head[frame_header_size_];
    uint64_t phash = 0;     // the payload's hash (frame.hpp): computed once, at the first transmission
    bool hashed = false;
    uint32_t off = 0, len = 0;  // the payload within the message at msgs.front() + msg_index
    bool last_of_msg = false, sacked = false, resent = false;
    double sent_at = 0, rto = 0;
    uint64_t xmit = 0;      // Engine::xmit_count_ at the last transmission
  };
  uint64_t base = 0, next_seq = 0, limit = 0;
  Ring<OutFrame> out;
  Ring<OutMsg> msgs;  // out[i]'s message: msgs[number of last_of_msg frames before i]
  size_t transmitted = 0;
  // Round-trip estimate (RFC 6298, from frames sent once: Karn's rule): the
  // first timeout of a new frame is max(cfg.rto, srtt + 4 rttvar), so a
  // loaded host that answers in milliseconds is not flooded with copies.
  double srtt = 0, rttvar = 0;
  // RACK: the latest transmission known delivered; the tail probe's clock.
  uint64_t rack_xmit = 0;
  double last_tx = 0, last_progress = 0;
  bool probe_out = false;

  // Receiving: the next frame expected (64-bit count), early frames by slot
  // (count mod window: distinct for the window's frames, whatever the wrap:
  // 2^32 is no multiple of most windows, so a slot from the 32-bit wire
  // number would collide at the wrap).
  struct Early {
    FrameHeader h;
    Buffer payload;
  };
  uint64_t expected = 0;
  std::vector<Early> early;
  uint64_t early_mask = 0;  // bit i: frame expected + i is held early (the selective acks, kept as they change)
  bool ack_due = false;     // acknowledge now (at the end of this progress call)
  uint32_t unacked = 0;      // frames received since an acknowledgement last went out
  double unacked_since = 0;  // when the first of them arrived
  // Reassembly of the message being received.
  Buffer msg;
  bool msg_open = false;
  uint8_t msg_tag = 0;
  uint32_t msg_len = 0, msg_next_frag = 0, msg_nfrags = 0;
  // The put being received (a message of type put): where its next bytes
  // go, and how many are still to come.
  bool msg_put = false;
  uint8_t* put_at = nullptr;
  size_t put_left = 0;
};

}  // namespace trillion::tb5
