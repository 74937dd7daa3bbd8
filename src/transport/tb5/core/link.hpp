// The small transport interface under the reliability engine: unreliable,
// unordered frames of at most mtu() bytes to a peer named by its rank. The
// udp and verbs backends implement it; FaultyLink wraps either to inject
// loss, duplication and reordering.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace trillion::tb5 {

// connect() found no local device or interface that reaches the peer (no
// cable, or no address in a shared subnet on it); what() lists both sides.
struct NoPath : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Link {
 public:
  virtual ~Link() = default;
  // The largest frame this link sends or receives.
  virtual size_t mtu() const = 0;
  // The largest frame to `peer` (connected): a path may allow less than
  // mtu(), e.g. when the other end's device takes smaller frames.
  virtual size_t frame_size(uint32_t) const { return mtu(); }
  // What peers need to reach this link (published through the modex).
  virtual std::vector<uint8_t> address() const = 0;
  // Makes rank `peer` reachable at `address`: picks the local device or
  // interface that shares a subnet with one of the peer's (the cable between
  // them). Throws NoPath when none does, std::runtime_error on a malformed
  // address or a connection that cannot be set up.
  virtual void connect(uint32_t peer, std::span<const uint8_t> address) = 0;
  // Sends one frame, best effort (a full queue or a dead path loses it).
  // Thread-safe: the heartbeat thread sends too.
  virtual void send(uint32_t peer, std::span<const uint8_t> frame) = 0;
  // The same frame given as its header and its payload in one or two parts
  // (a payload may start in one buffer and end in the next), so a backend
  // that can gather (sendmsg, a copy into a registered buffer) takes the
  // payload from where it lies; by default the parts are joined and sent.
  virtual void send_parts(uint32_t peer, std::span<const uint8_t> head, std::span<const uint8_t> body,
                          std::span<const uint8_t> body2) {
    thread_local std::vector<uint8_t> joined;
    joined.resize(head.size() + body.size() + body2.size());
    std::memcpy(joined.data(), head.data(), head.size());
    if (!body.empty()) std::memcpy(joined.data() + head.size(), body.data(), body.size());
    if (!body2.empty()) std::memcpy(joined.data() + head.size() + body.size(), body2.data(), body2.size());
    send(peer, joined);
  }
  // Calls on_frame for each frame that has arrived (without blocking), at
  // most `max` of them; returns how many. The frame's bytes are valid during
  // the call only; on_frame may send.
  virtual size_t poll(const std::function<void(std::span<const uint8_t>)>& on_frame, size_t max) = 0;
  // True if a corrupted payload never reaches poll() (udp: the kernel checks
  // UDP's checksum, in the NIC or while copying; the protection btl/tcp has
  // from TCP's): the engine then leaves payloads out of its frame checksum
  // (EngineConfig::payload_hash), which saves hashing every byte twice.
  virtual bool checks_payload() const { return false; }
  // "udp 10.0.0.1:5000", "verbs rdma_en3" — for logs and --metrics.
  virtual std::string describe() const = 0;
};

}  // namespace trillion::tb5
