// The verbs backend: frames as two-sided SENDs on unreliable-connected (UC)
// queue pairs — what macOS 26.2's RDMA over Thunderbolt 5 offers
// (librdma.dylib; MLX's JACCL uses the same subset): no RDMA WRITE/READ,
// path MTU 1024 (a SEND of up to 4 KiB is cut into packets), 32 work
// requests per queue pair, fewer than 64 posted receives.
//
// One device per Thunderbolt port (rdma_enN), each with its own IPv4 subnet,
// so in a full mesh each device reaches exactly one peer: the one at the
// other end of its cable. The link opens every device with an active port
// (or those btl_tb5_verbs_device names), publishes each one's GID, IPv4
// subnet and queue pairs, and reaches each peer through the local device
// whose subnet holds one of the peer's device addresses (core/subnet.hpp).
//
// The verbs library is opened at run time (dlopen), so nothing links
// against verbs and a machine without it, or without a device, gets a clean
// std::runtime_error ("no RDMA device: ...") and the BTL falls back or
// disqualifies itself. Tests run it against libtb5_verbs_sim (src/transport/tb5/sim).
#pragma once
#include <memory>
#include <string>

#include "transport/tb5/core/link.hpp"

namespace trillion::tb5 {

struct VerbsOptions {
  std::string library;    // "" = librdma.dylib on macOS, libibverbs.so.1 elsewhere (or TB5_VERBS_LIBRARY)
  std::string devices;    // comma-separated names; "" = every device whose port is active
  std::string gid_index;  // "" = each device's IPv4-mapped GID; else that index on every device
  size_t frame = 4096;    // the largest SEND (at most what a device reports)
};

std::unique_ptr<Link> open_verbs_link(const VerbsOptions& o, uint32_t self, uint32_t nranks);
// The same with one device name ("" = every device) and frame size.
std::unique_ptr<Link> open_verbs_link(const std::string& library, const std::string& device, size_t mtu,
                                      uint32_t self, uint32_t nranks);

// Receives posted per queue pair (Apple's stack fails ibv_post_recv with
// ENOMEM beyond about 63; MLX's JACCL posts 32), send slots per queue pair
// (its send queue's depth), and the window the engine may use on top of
// them: the difference leaves room for acks and heartbeats, which take
// receives too.
constexpr uint32_t verbs_recv_depth = 32;
constexpr uint32_t verbs_send_depth = 32;
constexpr uint32_t verbs_window = 24;

}  // namespace trillion::tb5
