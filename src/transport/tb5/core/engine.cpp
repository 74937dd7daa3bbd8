#include "transport/tb5/core/engine.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "transport/tb5/core/frame.hpp"
#include "transport/tb5/core/engine_peer.hpp"

namespace trillion::tb5 {
namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Frames read per progress call: bounded so one busy peer cannot starve the
// caller, large enough to drain a full window from every peer of a node.
constexpr size_t poll_batch = 256;

}  // namespace

Engine::Engine(Link& link, uint32_t self, uint32_t nranks, EngineConfig cfg, Deliver deliver, PeerDead on_dead,
               Clock clock)
    : link_(link), self_(self), cfg_(cfg), deliver_(std::move(deliver)), on_dead_(std::move(on_dead)),
      clock_(clock ? std::move(clock) : Clock(steady_seconds)) {
  if (cfg_.window < 1 || cfg_.window > 64) throw std::invalid_argument("tb5: window must be 1..64 frames");
  if (link_.mtu() <= frame_header_size_) throw std::invalid_argument("tb5: link MTU smaller than a frame header");
  if (self >= nranks) throw std::invalid_argument("tb5: own rank outside the job");
  peers_.resize(nranks);
  for (auto& p : peers_) p = std::make_unique<Peer>();
  hash_payloads_ = cfg_.payload_hash == 1 || (cfg_.payload_hash == -1 && !link_.checks_payload());
}

Engine::~Engine() = default;

void Engine::add_peer(uint32_t peer) {
  if (peer >= peers_.size() || peer == self_) throw std::invalid_argument("tb5: peer rank outside the job");
  Peer& p = *peers_[peer];
  p.base = p.next_seq = p.expected = cfg_.initial_seq;
  p.limit = p.base + cfg_.window;
  p.early.resize(cfg_.window);
  p.last_heard = clock_();
  p.active = true;
}

void Engine::send(uint32_t peer, uint8_t tag, std::span<const std::span<const uint8_t>> pieces) {
  Peer& p = *peers_.at(peer);
  if (!p.active) throw std::logic_error("tb5: send to a peer never added");
  if (p.closed || p.dead) return;  // nobody will take it: the dead-peer path ends the job
  size_t total = 0;
  for (auto& s : pieces) total += s.size();
  Peer::OutMsg& m = p.msgs.push_back();
  m.owned.reset(total);
  for (auto& s : pieces) m.owned.append(s);
  m.piece[0] = m.owned.view(0, total), m.piece[1] = {};
  m.cookie = nullptr;
  queue(peer, p, tag, total);
}

bool Engine::send_borrowed(uint32_t peer, uint8_t tag, std::span<const std::span<const uint8_t>> pieces, void* cookie) {
  Peer& p = *peers_.at(peer);
  if (!p.active) throw std::logic_error("tb5: send to a peer never added");
  size_t total = 0;
  for (auto& s : pieces) total += s.size();
  if (pieces.size() > 2 || p.closed || p.dead || total < cfg_.borrow_min) {
    send(peer, tag, pieces);
    return false;
  }
  Peer::OutMsg& m = p.msgs.push_back();
  m.piece[0] = pieces.size() > 0 ? pieces[0] : std::span<const uint8_t>{};
  m.piece[1] = pieces.size() > 1 ? pieces[1] : std::span<const uint8_t>{};
  m.cookie = cookie;
  queue(peer, p, tag, m.piece[0].size() + m.piece[1].size());
  return true;
}

bool Engine::put(uint32_t peer, uint64_t remote_addr, std::span<const uint8_t> data, void* cookie) {
  Peer& p = *peers_.at(peer);
  if (!p.active) throw std::logic_error("tb5: put to a peer never added");
  if (p.closed || p.dead) return false;
  Peer::OutMsg& m = p.msgs.push_back();
  // The address travels as the message's first 8 bytes, owned (a Ring slot
  // may move; its heap buffer does not); the data is borrowed.
  uint8_t addr[8];
  put64(addr, remote_addr);
  m.owned.reset(sizeof addr);
  m.owned.append(addr);
  m.piece[0] = m.owned.view(0, sizeof addr), m.piece[1] = data;
  m.cookie = cookie;
  queue(peer, p, 0, sizeof addr + data.size(), FrameType::put);
  return true;
}

// Cuts the message just added to p.msgs into frames and sends what the
// window allows.
void Engine::queue(uint32_t peer, Peer& p, uint8_t tag, size_t total, FrameType type) {
  if (total > UINT32_MAX) throw std::invalid_argument("tb5: message longer than 4 GiB");
  const Peer::OutMsg& m = p.msgs.back();
  const size_t per = max_payload(peer);
  const uint32_t nfrags = uint32_t(std::max<size_t>(1, (total + per - 1) / per));
  FrameHeader h;
  h.type = type;
  h.unhashed = !hash_payloads_;
  h.tag = tag;
  h.src = self_;
  h.msg_len = uint32_t(total);
  h.nfrags = nfrags;
  for (uint32_t f = 0; f < nfrags; ++f) {
    Peer::OutFrame& of = p.out.push_back();
    of.off = uint32_t(size_t(f) * per);
    of.len = uint32_t(std::min(per, total - of.off));
    of.last_of_msg = f + 1 == nfrags;
    of.sacked = of.resent = false;
    of.sent_at = of.rto = 0;
    of.xmit = 0;
    of.phash = 0, of.hashed = false;  // at its first transmission (pump)
    h.seq = uint32_t(p.next_seq++);
    h.frag = f;
    h.ack_now = m.cookie && of.last_of_msg;  // a borrowed message: its owner waits for this acknowledgement
    encode_header(h, uint16_t(of.len), 0, of.head);  // its checksum is written when it is sent
  }
  ++stats_.messages_sent;
  pump(peer, p, clock_());
}

uint64_t Engine::sack_bits(const Peer& p) const { return p.early_mask >> 1; }

void Engine::pump(uint32_t peer, Peer& p, double now) {
  const uint64_t sack = sack_bits(p);
  // Frames point into their message's buffer: walk the messages alongside.
  size_t msg = 0;
  auto transmit = [&](size_t i) {
    Peer::OutFrame& f = p.out[i];
    const auto [a, b] = p.msgs[msg].view(f.off, f.len);
    // Hashed as it first goes out, not when queued: the receiver works on
    // one frame while the next is hashed (a 4 MiB message hashed up front
    // kept the wire idle for ~0.13 ms).
    if (!f.hashed) f.phash = hash_payloads_ ? payload_hash(a, b) : 0, f.hashed = true;
    refresh_header_ack(f.head, f.phash, uint32_t(p.expected), sack, cfg_.window);
    link_.send_parts(peer, {f.head, frame_header_size_}, a, b);
    f.sent_at = p.last_tx = now;
    f.xmit = ++xmit_count_;
    ++stats_.frames_sent;
    p.ack_due = false;  // the acknowledgement rode on this frame
    p.unacked = 0;
  };
  // Retransmit what RACK declares lost (a frame transmitted later has
  // arrived and a quarter round trip more has passed) or what timed out.
  const double lost_after = p.srtt + p.srtt / 4;
  for (size_t i = 0; i < p.transmitted; ++i) {
    Peer::OutFrame& f = p.out[i];
    if (!f.sacked) {
      const bool lost = p.srtt > 0 && f.xmit < p.rack_xmit && now - f.sent_at >= lost_after;
      const bool timeout = now - f.sent_at >= f.rto;
      if (lost || timeout) {
        transmit(i);
        if (lost) {
          ++stats_.fast_retransmits;
        } else {
          ++stats_.timeouts;
          f.rto = std::min(f.rto * 2, cfg_.rto_max);
        }
        f.resent = true;
        ++stats_.retransmissions;
      }
    }
    if (f.last_of_msg) ++msg;
  }
  // New frames, as far as the window and the receiver's credit allow.
  while (p.transmitted < p.out.size() && p.transmitted < cfg_.window && p.base + p.transmitted < p.limit) {
    Peer::OutFrame& f = p.out[p.transmitted];
    f.rto = std::min(cfg_.rto_max, std::max(cfg_.rto, p.srtt + 4 * p.rttvar));
    transmit(p.transmitted++);
    if (f.last_of_msg) ++msg;
  }
  // Tail loss probe: frames are out, nothing has been acknowledged for two
  // round trips (and the receiver's ack delay) since the last transmission:
  // resend the newest unacknowledged
  // frame, whose acknowledgement's selective bits tell RACK what else is
  // missing. Only with an RTT estimate (before one, the timeout rules).
  if (p.srtt > 0 && p.transmitted > 0 && !p.probe_out &&
      now - std::max(p.last_tx, p.last_progress) >= 2 * p.srtt + cfg_.ack_delay) {
    size_t i = p.transmitted;
    while (i > 0 && p.out[i - 1].sacked) --i;
    if (i > 0) {
      msg = 0;
      for (size_t k = 0; k + 1 < i; ++k) msg += p.out[k].last_of_msg;
      transmit(i - 1);
      p.out[i - 1].resent = true;
      p.probe_out = true;
      ++stats_.probes;
      ++stats_.retransmissions;
    }
  }
}

void Engine::send_control(uint32_t peer, Peer& p, uint8_t type) {
  FrameHeader h;
  h.type = FrameType(type);
  h.src = self_;
  h.ack = uint32_t(p.expected);
  h.sack = sack_bits(p);
  h.window = cfg_.window;
  uint8_t buf[frame_header_size_];
  const size_t n = encode_frame(h, {}, buf);
  link_.send(peer, {buf, n});
}

void Engine::send_heartbeats() {
  FrameHeader h;
  h.type = FrameType::heartbeat;
  h.src = self_;
  uint8_t buf[frame_header_size_];
  const size_t n = encode_frame(h, {}, buf);
  for (uint32_t r = 0; r < peers_.size(); ++r)
    if (peers_[r]->active && !peers_[r]->closed) {
      link_.send(r, {buf, n});
      ++peers_[r]->heartbeats_sent;
    }
}

void Engine::take_ack(Peer& p, uint32_t ack32, uint64_t sack, uint32_t window) {
  const uint64_t ack = seq_lift(ack32, p.base);
  // Ignore an acknowledgement of frames never sent (a corrupt or stale frame).
  if (ack > p.base + p.transmitted) return;
  const double now = clock_();
  bool progressed = false;
  auto delivered = [&](const Peer::OutFrame& f) {
    p.rack_xmit = std::max(p.rack_xmit, f.xmit);
    progressed = true;
    if (f.resent) return;
    const double sample = now - f.sent_at;
    if (p.srtt == 0) {
      p.srtt = sample, p.rttvar = sample / 2;
    } else {
      p.rttvar = 0.75 * p.rttvar + 0.25 * std::abs(p.srtt - sample);
      p.srtt = 0.875 * p.srtt + 0.125 * sample;
    }
  };
  while (p.base < ack) {
    const Peer::OutFrame& f = p.out.front();
    if (!f.sacked) delivered(f);
    if (f.last_of_msg) {
      if (p.msgs.front().cookie) sent_.push_back(p.msgs.front().cookie);
      p.msgs.pop_front();
    }
    p.out.pop_front();
    ++p.base;
    --p.transmitted;
  }
  for (uint32_t i = 0; i < 64 && (sack >> i) != 0; ++i) {
    if (!(sack >> i & 1)) continue;
    const uint64_t seq = ack + 1 + i;
    if (seq < p.base || seq - p.base >= p.transmitted) continue;
    Peer::OutFrame& f = p.out[seq - p.base];
    if (!f.sacked) {
      f.sacked = true;
      delivered(f);
    }
  }
  if (progressed) p.last_progress = now, p.probe_out = false;
  p.limit = std::max(p.limit, ack + std::min(window, cfg_.window));
}

void Engine::on_frame(std::span<const uint8_t> bytes) {
  auto d = decode_frame(bytes);
  if (!d) {
    ++stats_.bad_frames;
    return;
  }
  const FrameHeader& h = d->header;
  if (h.src >= peers_.size() || h.src == self_ || !peers_[h.src]->active) {
    ++stats_.bad_frames;
    return;
  }
  Peer& p = *peers_[h.src];
  p.last_heard = last_frame_any_ = now_;
  ++p.frames_heard;
  switch (h.type) {
    case FrameType::bye:
      // Gone: what it never acknowledged it no longer needs (it finalized);
      // borrowed buffers go back to their owners.
      p.closed = true;
      for (size_t i = 0; i < p.msgs.size(); ++i)
        if (p.msgs[i].cookie) sent_.push_back(p.msgs[i].cookie);
      while (!p.msgs.empty()) p.msgs.pop_front();
      while (!p.out.empty()) p.out.pop_front();
      p.transmitted = 0;
      break;
    case FrameType::heartbeat: break;
    case FrameType::ack: take_ack(p, h.ack, h.sack, h.window); break;
    case FrameType::data:
    case FrameType::put:
      take_ack(p, h.ack, h.sack, h.window);
      take_data(p, h.src, h, d->payload);
      break;
  }
}

int Engine::progress() {
  if (in_progress_) return 0;
  in_progress_ = true;
  struct Reset {
    bool& b;
    ~Reset() { b = false; }
  } reset{in_progress_};
  now_ = clock_();
  delivered_now_ = 0;
  const size_t got = link_.poll([this](std::span<const uint8_t> f) { on_frame(f); }, poll_batch);
  const double now = got ? clock_() : now_;
  uint32_t dead_peer = UINT32_MAX;
  double dead_silence = 0;
  for (uint32_t r = 0; r < peers_.size(); ++r) {
    Peer& p = *peers_[r];
    if (!p.active) continue;
    pump(r, p, now);
    if (p.unacked && (p.ack_due || p.unacked >= std::max<uint32_t>(1, cfg_.window / 4) ||
                      now - p.unacked_since >= cfg_.ack_delay)) {
      send_control(r, p, uint8_t(FrameType::ack));
      ++stats_.acks_sent;
      p.ack_due = false;
      p.unacked = 0;
    }
    // Only judge silence once the link is drained: a backlog of unread
    // frames is not silence. One death per call: on_dead ends the job.
    if (got < poll_batch && !p.closed && !p.dead && now - p.last_heard > cfg_.peer_timeout &&
        dead_peer == UINT32_MAX) {
      p.dead = true;
      dead_peer = r, dead_silence = now - p.last_heard;
    }
  }
  if (dead_peer != UINT32_MAX) on_dead_(dead_peer, dead_silence);
  // Borrowed messages acknowledged: their owners may reuse or free them (and
  // send more: on_sent may call send, which adds to nothing read here).
  if (!on_sent_) sent_.clear();
  if (!sent_.empty()) {
    thread_local std::vector<void*> done;
    done.swap(sent_);
    for (void* c : done) on_sent_(c);
    done.clear();
  }
  return int(got + delivered_now_);
}

bool Engine::all_acknowledged() const {
  for (auto& p : peers_)
    if (p->active && !p->closed && !p->dead && !p->out.empty()) return false;
  return true;
}

std::string Engine::peer_report(uint32_t peer) const {
  const Peer& p = *peers_.at(peer);
  char any[64] = "no frame from any peer yet";
  if (last_frame_any_ > 0)
    std::snprintf(any, sizeof any, "last frame from any peer %.1f s ago", clock_() - last_frame_any_);
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "%llu frames heard from it; %s; %llu bad frames; to it: %zu frames unacknowledged of %zu queued, "
                "%llu heartbeats sent",
                (unsigned long long)p.frames_heard, any, (unsigned long long)stats_.bad_frames, p.transmitted,
                p.out.size(), (unsigned long long)p.heartbeats_sent.load());
  return buf;
}

bool Engine::flush(double timeout) {
  const double until = clock_() + timeout;
  for (;;) {  // at least one round, whatever the timeout
    const int n = progress();
    if (all_acknowledged()) return true;
    if (clock_() >= until) return false;
    if (n == 0) std::this_thread::yield();  // ranks may outnumber cores
  }
}

void Engine::close() {
  // A bye is not retransmitted, and a link may hold frames a while (a
  // stalled or reordering wire; the simulator's and FaultyLink's in-process
  // queues, which die with the process). Three byes sent at once just before
  // exit could all sit behind one stall: a peer still waiting for our last
  // ack then declared us dead (CI, under load). So the byes go out in rounds
  // spread over ~0.1 s, the link polled between them (frames that arrive are
  // dropped: we are leaving) so whatever it holds goes out. Counted in
  // rounds and sleeps, not clock_(): a test's clock may stand still.
  constexpr int kRounds = 5, kPollsPerRound = 20;
  const auto drop = [](std::span<const uint8_t>) {};
  for (int round = 0; round < kRounds; ++round) {
    for (uint32_t r = 0; r < peers_.size(); ++r)
      if (peers_[r]->active && !peers_[r]->closed) send_control(r, *peers_[r], uint8_t(FrameType::bye));
    for (int i = 0; i < kPollsPerRound; ++i) {
      link_.poll(drop, poll_batch);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
}

}  // namespace trillion::tb5
