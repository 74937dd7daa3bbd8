// The small transport interface under the reliability engine: unreliable,
// unordered frames of at most mtu() bytes to a peer named by its rank. The
// udp and verbs backends implement it; FaultyLink wraps either to inject
// loss, duplication and reordering.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace trillion::tb5 {

class Link {
 public:
  virtual ~Link() = default;
  virtual size_t mtu() const = 0;
  // What peers need to reach this link (published through the modex).
  virtual std::vector<uint8_t> address() const = 0;
  // Makes rank `peer` reachable at `address`; throws std::runtime_error on a
  // malformed address or a connection that cannot be set up.
  virtual void connect(uint32_t peer, std::span<const uint8_t> address) = 0;
  // Sends one frame, best effort (a full queue or a dead path loses it).
  // Thread-safe: the heartbeat thread sends too.
  virtual void send(uint32_t peer, std::span<const uint8_t> frame) = 0;
  // Calls on_frame for each frame that has arrived (without blocking), at
  // most `max` of them; returns how many.
  virtual size_t poll(const std::function<void(std::span<const uint8_t>)>& on_frame, size_t max) = 0;
  // "udp 10.0.0.1:5000", "verbs rdma_en3" — for logs and --metrics.
  virtual std::string describe() const = 0;
};

}  // namespace trillion::tb5
