// The udp backend: frames as datagrams over IPv4 interfaces (the
// Thunderbolt ports' IP when RDMA is off, one subnet per cable in a full
// mesh, or a bridge; loopback or veths in the tests). One socket: bound to
// the interface's address when there is one, to every address when there
// are several (the kernel routes each datagram out of the interface whose
// subnet holds the peer's address chosen at connect()).
#pragma once
#include <netinet/in.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "transport/tb5/core/link.hpp"
#include "transport/tb5/core/subnet.hpp"

namespace trillion::tb5 {

// The interfaces `spec` names: a comma-separated list of interface names
// ("en3"), addresses (the interface whose subnet holds it, at that address)
// and subnets ("10.0.0.0/16": every interface in it); empty: every up,
// non-loopback IPv4 interface, else loopback. Each with its prefix length.
// Throws std::runtime_error naming `spec` if it matches none.
std::vector<Ipv4Net> ipv4_interfaces(const std::string& spec);
// The first of them (the verbs simulator's single-device address).
in_addr choose_ipv4(const std::string& spec);

class UdpLink final : public Link {
 public:
  // Binds an ephemeral port; mtu is the largest frame (<= 65507).
  UdpLink(std::vector<Ipv4Net> ifs, size_t mtu, uint32_t nranks);
  UdpLink(in_addr addr, size_t mtu, uint32_t nranks);  // one interface, at addr
  ~UdpLink() override;
  size_t mtu() const override { return mtu_; }
  size_t frame_size(uint32_t peer) const override { return peers_[peer].frame; }
  std::vector<uint8_t> address() const override;
  void connect(uint32_t peer, std::span<const uint8_t> address) override;
  void send(uint32_t peer, std::span<const uint8_t> frame) override { send_parts(peer, frame, {}, {}); }
  void send_parts(uint32_t peer, std::span<const uint8_t> head, std::span<const uint8_t> body,
                  std::span<const uint8_t> body2) override;
  size_t poll(const std::function<void(std::span<const uint8_t>)>& on_frame, size_t max) override;
  bool checks_payload() const override { return true; }  // UDP's checksum
  // Datagrams dropped because they came from no connected peer's address and
  // port (stray traffic, or a host outside the job: tb5 frames can carry
  // puts, which write where they say). Not proof against a sender that forges
  // a peer's source address: udp trusts the network it runs on, as btl/tcp
  // does (docs/tb5.md).
  uint64_t strangers() const { return strangers_; }
  std::string describe() const override;
  // The kernel's receive buffer, bytes (the api sizes the window by it).
  size_t receive_buffer() const { return rcvbuf_; }
  // Whether frames leave through an interface other than loopback, where a
  // datagram larger than the link's MTU travels as IP fragments.
  bool fragments() const {
    for (const auto& n : ifs_)
      if (!n.loopback) return true;
    return false;
  }

 private:
  struct Peer {
    sockaddr_in to{};
    size_t frame = 0;
  };
  int fd_ = -1;
  size_t mtu_, rcvbuf_ = 0;
  std::vector<Ipv4Net> ifs_;
  sockaddr_in self_{};
  std::vector<Peer> peers_;
  std::vector<std::pair<uint32_t, uint16_t>> senders_;  // every connected peer's (address, port), network order
  uint64_t strangers_ = 0;
  std::vector<uint8_t> buf_;
};

}  // namespace trillion::tb5
