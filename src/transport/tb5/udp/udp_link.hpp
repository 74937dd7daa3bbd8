// The udp backend: frames as datagrams over one IPv4 interface (the
// Thunderbolt bridge when RDMA is off; loopback or a veth in the tests).
#pragma once
#include <netinet/in.h>

#include <mutex>
#include <string>
#include <vector>

#include "transport/tb5/core/link.hpp"

namespace trillion::tb5 {

// The IPv4 address to bind for `spec`: an interface name ("bridge0", "lo"),
// a dotted address, or empty (the first up, non-loopback IPv4 interface,
// else loopback). Throws std::runtime_error naming `spec` if it matches none.
in_addr choose_ipv4(const std::string& spec);

class UdpLink final : public Link {
 public:
  // Binds an ephemeral port on `addr`; mtu is the largest frame (<= 65507).
  UdpLink(in_addr addr, size_t mtu, uint32_t nranks);
  ~UdpLink() override;
  size_t mtu() const override { return mtu_; }
  std::vector<uint8_t> address() const override;
  void connect(uint32_t peer, std::span<const uint8_t> address) override;
  void send(uint32_t peer, std::span<const uint8_t> frame) override;
  size_t poll(const std::function<void(std::span<const uint8_t>)>& on_frame, size_t max) override;
  std::string describe() const override;

 private:
  int fd_ = -1;
  size_t mtu_;
  sockaddr_in self_{};
  std::vector<sockaddr_in> peers_;
  std::vector<uint8_t> buf_;
};

}  // namespace trillion::tb5
