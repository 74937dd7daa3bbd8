#include "transport/tb5/core/engine.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "transport/tb5/core/frame.hpp"

namespace trillion::tb5 {
namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Frames read per progress call: bounded so one busy peer cannot starve the
// caller, large enough to drain a full window from every peer of a node.
constexpr size_t poll_batch = 256;

}  // namespace

struct Engine::Peer {
  std::atomic<bool> active{false}, closed{false};
  bool dead = false;
  double last_heard = 0;
  uint64_t frames_heard = 0;                // for peer_report
  std::atomic<uint64_t> heartbeats_sent{0};  // by the heartbeat thread
  // Sending: frames base .. base+out.size()-1; the first `transmitted` of
  // them have gone out at least once.
  struct OutFrame {
    std::vector<uint8_t> bytes;
    double sent_at = 0, rto = 0;
    bool sacked = false, resent = false, fast = false;
  };
  // Round-trip estimate (RFC 6298, from frames sent once: Karn's rule): the
  // first timeout of a new frame is max(cfg.rto, srtt + 4 rttvar), so a
  // loaded host that answers in milliseconds is not flooded with copies.
  double srtt = 0, rttvar = 0;
  uint32_t base = 0, next_seq = 0, limit = 0;
  std::deque<OutFrame> out;
  size_t transmitted = 0;
  // Receiving: the next expected sequence number, early frames by slot.
  struct Early {
    FrameHeader h;
    std::vector<uint8_t> payload;
  };
  uint32_t expected = 0;
  std::vector<std::optional<Early>> early;
  bool ack_due = false;
  // Reassembly of the message being received.
  std::vector<uint8_t> msg;
  uint8_t msg_tag = 0;
  uint32_t msg_len = 0, msg_next_frag = 0, msg_nfrags = 0;
};

Engine::Engine(Link& link, uint32_t self, uint32_t nranks, EngineConfig cfg, Deliver deliver, PeerDead on_dead,
               Clock clock)
    : link_(link), self_(self), cfg_(cfg), deliver_(std::move(deliver)), on_dead_(std::move(on_dead)),
      clock_(clock ? std::move(clock) : Clock(steady_seconds)) {
  if (cfg_.window < 1 || cfg_.window > 64) throw std::invalid_argument("tb5: window must be 1..64 frames");
  if (link_.mtu() <= frame_header_size_) throw std::invalid_argument("tb5: link MTU smaller than a frame header");
  if (self >= nranks) throw std::invalid_argument("tb5: own rank outside the job");
  peers_.resize(nranks);
  for (auto& p : peers_) p = std::make_unique<Peer>();
}

Engine::~Engine() = default;

void Engine::add_peer(uint32_t peer) {
  if (peer >= peers_.size() || peer == self_) throw std::invalid_argument("tb5: peer rank outside the job");
  Peer& p = *peers_[peer];
  p.limit = p.base + cfg_.window;
  p.early.assign(cfg_.window, std::nullopt);
  p.last_heard = clock_();
  p.active = true;
}

void Engine::send(uint32_t peer, uint8_t tag, std::span<const std::span<const uint8_t>> pieces) {
  Peer& p = *peers_.at(peer);
  if (!p.active) throw std::logic_error("tb5: send to a peer never added");
  if (p.closed || p.dead) return;  // nobody will take it: the dead-peer path ends the job
  size_t total = 0;
  for (auto& s : pieces) total += s.size();
  if (total > UINT32_MAX) throw std::invalid_argument("tb5: message longer than 4 GiB");
  const size_t per = max_payload();
  const uint32_t nfrags = uint32_t(std::max<size_t>(1, (total + per - 1) / per));
  // Walk the pieces, cutting frames at `per` bytes.
  size_t piece = 0, in_piece = 0;
  std::vector<uint8_t> payload;
  for (uint32_t f = 0; f < nfrags; ++f) {
    const size_t n = std::min(per, total - size_t(f) * per);
    payload.resize(n);
    for (size_t done = 0; done < n;) {
      while (in_piece == pieces[piece].size()) ++piece, in_piece = 0;
      const size_t k = std::min(n - done, pieces[piece].size() - in_piece);
      std::memcpy(payload.data() + done, pieces[piece].data() + in_piece, k);
      done += k, in_piece += k;
    }
    FrameHeader h;
    h.type = FrameType::data;
    h.tag = tag;
    h.src = self_;
    h.seq = p.next_seq++;
    h.msg_len = uint32_t(total);
    h.frag = f;
    h.nfrags = nfrags;
    Peer::OutFrame of;
    of.bytes.resize(frame_header_size_ + n);
    encode_frame(h, payload, of.bytes.data());
    p.out.push_back(std::move(of));
  }
  ++stats_.messages_sent;
  pump(peer, p, clock_());
}

uint64_t Engine::sack_bits(const Peer& p) const {
  uint64_t bits = 0;
  const uint32_t n = std::min<uint32_t>(64, cfg_.window - 1);
  for (uint32_t i = 0; i < n; ++i)
    if (p.early[(p.expected + 1 + i) % cfg_.window]) bits |= uint64_t(1) << i;
  return bits;
}

void Engine::pump(uint32_t peer, Peer& p, double now) {
  const uint64_t sack = sack_bits(p);
  auto transmit = [&](Peer::OutFrame& f) {
    refresh_frame_ack(f.bytes.data(), f.bytes.size(), p.expected, sack, cfg_.window);
    link_.send(peer, f.bytes);
    f.sent_at = now;
    ++stats_.frames_sent;
    p.ack_due = false;  // the acknowledgement rode on this frame
  };
  // Retransmit what timed out (and was not selectively acknowledged).
  for (size_t i = 0; i < p.transmitted; ++i) {
    Peer::OutFrame& f = p.out[i];
    if (f.sacked || now - f.sent_at < f.rto) continue;
    transmit(f);
    f.rto = std::min(f.rto * 2, cfg_.rto_max);
    f.resent = true;
    ++stats_.retransmissions;
  }
  // New frames, as far as the window and the receiver's credit allow.
  while (p.transmitted < p.out.size() && p.transmitted < cfg_.window &&
         seq_before(p.base + uint32_t(p.transmitted), p.limit)) {
    Peer::OutFrame& f = p.out[p.transmitted++];
    f.rto = std::min(cfg_.rto_max, std::max(cfg_.rto, p.srtt + 4 * p.rttvar));
    transmit(f);
  }
}

void Engine::send_control(uint32_t peer, Peer& p, uint8_t type) {
  FrameHeader h;
  h.type = FrameType(type);
  h.src = self_;
  h.ack = p.expected;
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

void Engine::take_ack(Peer& p, uint32_t ack, uint64_t sack, uint32_t window) {
  // Ignore an acknowledgement of frames never sent (a corrupt or stale frame).
  if (seq_before(p.base + uint32_t(p.transmitted), ack)) return;
  const double now = clock_();
  while (seq_before(p.base, ack)) {
    const Peer::OutFrame& f = p.out.front();
    if (!f.resent) {
      const double sample = now - f.sent_at;
      if (p.srtt == 0) {
        p.srtt = sample, p.rttvar = sample / 2;
      } else {
        p.rttvar = 0.75 * p.rttvar + 0.25 * std::abs(p.srtt - sample);
        p.srtt = 0.875 * p.srtt + 0.125 * sample;
      }
    }
    p.out.pop_front();
    ++p.base;
    --p.transmitted;
  }
  for (uint32_t i = 0; i < 64; ++i) {
    if (!(sack >> i & 1)) continue;
    const uint32_t seq = ack + 1 + i;
    if (seq_before(seq, p.base)) continue;
    const uint32_t idx = seq - p.base;
    if (idx < p.transmitted) p.out[idx].sacked = true;
  }
  // Fast retransmit: frames after `ack` arrived but `ack` itself did not, so
  // it was most likely lost; resend it now (once) instead of at its timeout.
  if (sack != 0 && p.transmitted > 0 && p.base == ack && !p.out.front().fast) {
    p.out.front().fast = true;
    p.out.front().sent_at = -1e300;
  }
  const uint32_t limit = ack + std::min(window, cfg_.window);
  if (seq_before(p.limit, limit)) p.limit = limit;
}

void Engine::take_data(Peer& p, uint32_t src, const FrameHeader& h, std::span<const uint8_t> payload) {
  p.ack_due = true;  // even a duplicate: our previous ack may have been lost
  if (seq_before(h.seq, p.expected)) {
    ++stats_.duplicates_dropped;
    return;
  }
  const uint32_t ahead = h.seq - p.expected;
  if (ahead >= cfg_.window) {
    ++stats_.out_of_window;
    return;
  }
  auto& slot = p.early[h.seq % cfg_.window];
  if (slot) {
    ++stats_.duplicates_dropped;
    return;
  }
  if (ahead > 0) ++stats_.reordered;
  slot = Peer::Early{h, std::vector<uint8_t>(payload.begin(), payload.end())};
  // Consume the in-order run.
  while (auto& next = p.early[p.expected % cfg_.window]) {
    const FrameHeader& fh = next->h;
    if (fh.frag == 0) {
      p.msg.clear();
      p.msg.reserve(fh.msg_len);
      p.msg_tag = fh.tag;
      p.msg_len = fh.msg_len;
      p.msg_nfrags = fh.nfrags;
      p.msg_next_frag = 0;
    }
    if (fh.frag != p.msg_next_frag || fh.nfrags != p.msg_nfrags)
      throw std::runtime_error("tb5: fragment out of sequence from rank " + std::to_string(src));
    p.msg.insert(p.msg.end(), next->payload.begin(), next->payload.end());
    ++p.msg_next_frag;
    if (p.msg_next_frag == p.msg_nfrags) {
      if (p.msg.size() != p.msg_len)
        throw std::runtime_error("tb5: message length mismatch from rank " + std::to_string(src));
      ready_.push_back({src, p.msg_tag, std::move(p.msg)});
      p.msg = {};
    }
    next.reset();
    ++p.expected;
  }
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
  p.last_heard = last_frame_any_ = clock_();
  ++p.frames_heard;
  switch (h.type) {
    case FrameType::bye: p.closed = true; break;
    case FrameType::heartbeat: break;
    case FrameType::ack: take_ack(p, h.ack, h.sack, h.window); break;
    case FrameType::data:
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
  const size_t got = link_.poll([this](std::span<const uint8_t> f) { on_frame(f); }, poll_batch);
  std::vector<Ready> ready;
  ready.swap(ready_);
  for (auto& m : ready) {
    ++stats_.messages_delivered;
    deliver_(m.peer, m.tag, m.bytes);  // may call send()
  }
  const double now = clock_();
  std::vector<std::pair<uint32_t, double>> dead;
  for (uint32_t r = 0; r < peers_.size(); ++r) {
    Peer& p = *peers_[r];
    if (!p.active) continue;
    pump(r, p, now);
    if (p.ack_due) {
      send_control(r, p, uint8_t(FrameType::ack));
      ++stats_.acks_sent;
      p.ack_due = false;
    }
    // Only judge silence once the link is drained: a backlog of unread
    // frames is not silence.
    if (got < poll_batch && !p.closed && !p.dead && now - p.last_heard > cfg_.peer_timeout) {
      p.dead = true;
      dead.emplace_back(r, now - p.last_heard);
    }
  }
  for (auto& [r, s] : dead) on_dead_(r, s);
  return int(got + ready.size());
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
