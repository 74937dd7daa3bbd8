// The engine's receiving side: data frames in order, early ones held, and
// messages reassembled and delivered (engine.hpp).
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "transport/tb5/core/engine_peer.hpp"

namespace trillion::tb5 {
namespace {

// A peer broke the message protocol (a bug or a foreign sender, never loss:
// the checksum and the sequence already handled that).
[[noreturn]] void protocol_error(const char* what, uint32_t src) {
  throw std::runtime_error(std::string("tb5: ") + what + " from rank " + std::to_string(src));
}

}  // namespace

void Engine::take_data(Peer& p, uint32_t src, const FrameHeader& h, std::span<const uint8_t> payload) {
  if (p.unacked++ == 0) p.unacked_since = now_;
  if (h.ack_now) p.ack_due = true;
  const uint64_t seq = seq_lift(h.seq, p.expected);
  if (seq < p.expected) {
    ++stats_.duplicates_dropped;
    p.ack_due = true;  // our previous ack may have been lost
    return;
  }
  if (seq - p.expected >= cfg_.window) {
    ++stats_.out_of_window;
    p.ack_due = true;
    return;
  }
  if (seq != p.expected) {  // early: kept until the frames before it arrive; the sender learns of the hole now
    p.ack_due = true;
    const uint64_t bit = uint64_t(1) << (seq - p.expected);
    if (p.early_mask & bit) {
      ++stats_.duplicates_dropped;
      return;
    }
    ++stats_.reordered;
    p.early_mask |= bit;
    Peer::Early& e = p.early[seq % cfg_.window];
    e.h = h;
    e.payload.reset(payload.size());
    e.payload.append(payload);
    return;
  }
  // In order: consumed straight from the link's buffer, then the run of
  // early frames it completes.
  ++p.expected;
  p.early_mask >>= 1;
  consume(p, src, h, payload);
  while (p.early_mask & 1) {
    Peer::Early& e = p.early[p.expected % cfg_.window];
    ++p.expected;
    p.early_mask >>= 1;
    consume(p, src, e.h, e.payload.view(0, e.payload.len));
  }
}

void Engine::consume(Peer& p, uint32_t src, const FrameHeader& h, std::span<const uint8_t> payload) {
  if (h.type == FrameType::put || (p.msg_open && p.msg_put)) return place(p, src, h, payload);
  if (h.frag == 0 && h.nfrags == 1) {  // a whole message in one frame: no copy
    if (p.msg_open) protocol_error("fragment out of sequence", src);
    if (payload.size() != h.msg_len) protocol_error("message length mismatch", src);
    ++stats_.messages_delivered, ++delivered_now_;
    deliver_(src, h.tag, payload);  // may call send()
    return;
  }
  if (h.frag == 0) {
    if (p.msg_open) protocol_error("fragment out of sequence", src);
    p.msg.reset(h.msg_len);
    p.msg_open = true;
    p.msg_put = false;
    p.msg_tag = h.tag;
    p.msg_len = h.msg_len;
    p.msg_nfrags = h.nfrags;
    p.msg_next_frag = 0;
  }
  if (!p.msg_open || h.frag != p.msg_next_frag || h.nfrags != p.msg_nfrags)
    protocol_error("fragment out of sequence", src);
  if (p.msg.len + payload.size() > p.msg_len) protocol_error("message length mismatch", src);
  p.msg.append(payload);
  if (++p.msg_next_frag < p.msg_nfrags) return;
  if (p.msg.len != p.msg_len) protocol_error("message length mismatch", src);
  p.msg_open = false;
  ++stats_.messages_delivered, ++delivered_now_;
  deliver_(src, p.msg_tag, p.msg.view(0, p.msg.len));  // may call send()
}

// A put's fragment, in order: its payload goes straight to where the first
// fragment's address says (the peer's put names memory of this process, as
// an RDMA write would); nothing is delivered.
void Engine::place(Peer& p, uint32_t src, const FrameHeader& h, std::span<const uint8_t> payload) {
  if (h.type != FrameType::put) protocol_error("fragment out of sequence", src);
  if (h.frag == 0) {
    if (p.msg_open) protocol_error("fragment out of sequence", src);
    if (h.msg_len < 8 || payload.size() < 8) protocol_error("put without an address", src);
    const uint64_t addr = get64(payload.data());
    payload = payload.subspan(8);
    p.msg_open = p.msg_put = true;
    p.msg_nfrags = h.nfrags;
    p.msg_next_frag = 0;
    p.put_at = reinterpret_cast<uint8_t*>(uintptr_t(addr));
    p.put_left = h.msg_len - 8;
  }
  if (!p.msg_open || !p.msg_put || h.frag != p.msg_next_frag || h.nfrags != p.msg_nfrags)
    protocol_error("fragment out of sequence", src);
  if (payload.size() > p.put_left) protocol_error("put length mismatch", src);
  if (!payload.empty()) std::memcpy(p.put_at, payload.data(), payload.size());
  p.put_at += payload.size();
  p.put_left -= payload.size();
  if (++p.msg_next_frag < p.msg_nfrags) return;
  if (p.put_left != 0) protocol_error("put length mismatch", src);
  p.msg_open = p.msg_put = false;
  ++stats_.puts_placed, ++delivered_now_;
}

}  // namespace trillion::tb5
