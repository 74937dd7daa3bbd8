// The verbs backend: frames as two-sided SENDs on unreliable-connected (UC)
// queue pairs — what macOS 26.2's RDMA over Thunderbolt 5 offers
// (librdma.dylib, devices rdma_enN; MLX's JACCL uses the same subset): no
// RDMA WRITE/READ, MTU 1024, 32 work requests per queue pair, fewer than 64
// posted receives. One queue pair per peer, all made when the link opens (a
// peer's address holds the queue pair it made for each rank), one send and
// one receive completion queue, polled.
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

// library: "" = librdma.dylib on macOS, libibverbs.so.1 elsewhere (or the
// TB5_VERBS_LIBRARY environment variable); device: "" = the first one.
std::unique_ptr<Link> open_verbs_link(const std::string& library, const std::string& device, size_t mtu,
                                      uint32_t self, uint32_t nranks);

// Receives posted per queue pair (Apple's stack fails ibv_post_recv with
// ENOMEM beyond about 63) and the window the engine may use on top of them:
// the difference leaves room for acks and heartbeats, which take receives too.
constexpr uint32_t verbs_recv_depth = 32;
constexpr uint32_t verbs_send_depth = 32;
constexpr uint32_t verbs_window = 24;

}  // namespace trillion::tb5
