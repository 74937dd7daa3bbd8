// IPv4 subnets and the choice of a path to a peer: which local device or
// interface shares a subnet with one of the peer's (the cable between them).
// Plain code, no system calls: the backends list their own addresses.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace trillion::tb5 {

// One address with its prefix length, e.g. 10.0.1.1/30; `addr` in network
// byte order (as in_addr.s_addr), `name` the interface or device ("en3",
// "rdma_en3") for messages.
struct Ipv4Net {
  uint32_t addr = 0;
  uint8_t prefix = 32;
  std::string name;
  bool loopback = false;  // an interface's flag (udp: no IP fragmentation there)
  uint32_t mask() const;  // network byte order
  bool contains(uint32_t other) const { return ((addr ^ other) & mask()) == 0; }
};

std::string to_string(const Ipv4Net& n);  // "rdma_en3 10.0.1.1/30"
std::string ipv4_string(uint32_t addr);   // "10.0.1.1"

// "a.b.c.d/n" (or "a.b.c.d" as /32); nullopt if malformed.
std::optional<Ipv4Net> parse_ipv4_net(const std::string& s);

struct Path {
  size_t local = 0, remote = 0;  // indices into the two lists
};

// The local net that holds one of the peer's addresses; of several, the most
// specific (longest prefix): a cable's /30 before a LAN's /24, so a shared
// LAN never carries what a cable can. Throws NoPath when none does, or
// std::runtime_error when two local nets of that prefix both do (two cables
// in one subnet: which one leads to the peer cannot be told); `peer` names
// the peer in both messages ("rank 2 (studio-c)").
Path choose_path(std::span<const Ipv4Net> local, std::span<const Ipv4Net> remote, const std::string& peer);

}  // namespace trillion::tb5
