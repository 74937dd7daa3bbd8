#include "transport/tb5/udp/udp_link.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "platform/socket.hpp"

namespace trillion::tb5 {
namespace {

std::runtime_error sys_error(const std::string& what) {
  return std::runtime_error("tb5 udp: " + what + ": " + std::strerror(errno));
}

std::string to_string(const sockaddr_in& a) {
  char ip[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
  return std::string(ip) + ":" + std::to_string(ntohs(a.sin_port));
}

}  // namespace

in_addr choose_ipv4(const std::string& spec) {
  in_addr a{};
  if (!spec.empty() && inet_pton(AF_INET, spec.c_str(), &a) == 1) return a;
  // A subnet ("10.0.0.0/24"): the interface whose address is in it, so one
  // setting serves every host of a cluster.
  uint32_t net = 0, mask = 0;
  const auto slash = spec.find('/');
  if (slash != std::string::npos) {
    in_addr n{};
    const int bits = std::atoi(spec.c_str() + slash + 1);
    if (inet_pton(AF_INET, spec.substr(0, slash).c_str(), &n) != 1 || bits < 0 || bits > 32)
      throw std::runtime_error("tb5 udp: btl_tb5_if_include '" + spec + "' is not a valid IPv4 subnet");
    mask = bits == 0 ? 0 : htonl(~uint32_t(0) << (32 - bits));
    net = n.s_addr & mask;
  }
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) throw sys_error("getifaddrs");
  bool found = false, have_lo = false;
  in_addr lo{};
  for (ifaddrs* i = list; i && !found; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
    const in_addr ia = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr;
    if (spec.empty()) {
      if (i->ifa_flags & IFF_LOOPBACK) {
        lo = ia, have_lo = true;
        continue;
      }
      a = ia, found = true;
    } else if (spec == i->ifa_name || (slash != std::string::npos && (ia.s_addr & mask) == net)) {
      a = ia, found = true;
    }
  }
  freeifaddrs(list);
  if (!found && spec.empty() && have_lo) return lo;
  if (!found)
    throw std::runtime_error("tb5 udp: btl_tb5_if_include '" + spec +
                             "' names no IPv4 interface that is up on this host (give an interface name or address)");
  return a;
}

UdpLink::UdpLink(in_addr addr, size_t mtu, uint32_t nranks) : mtu_(mtu), peers_(nranks), buf_(mtu + 1) {
  if (mtu < 64 || mtu > 65507) throw std::invalid_argument("tb5 udp: MTU must be 64..65507 bytes");
  fd_ = platform::open_udp_socket();
  if (fd_ < 0) throw sys_error("socket");
  // Generous kernel buffers: a window from every peer must fit while this
  // rank computes instead of polling.
  int size = 4 << 20;
  setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
  self_.sin_family = AF_INET;
  self_.sin_addr = addr;
  self_.sin_port = 0;
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&self_), sizeof self_) != 0) {
    const auto e = sys_error("bind " + to_string(self_));
    ::close(fd_);
    throw e;
  }
  socklen_t len = sizeof self_;
  getsockname(fd_, reinterpret_cast<sockaddr*>(&self_), &len);
}

UdpLink::~UdpLink() {
  if (fd_ >= 0) ::close(fd_);
}

std::vector<uint8_t> UdpLink::address() const {
  // 4 bytes address + 2 bytes port, network order.
  std::vector<uint8_t> a(6);
  std::memcpy(a.data(), &self_.sin_addr, 4);
  std::memcpy(a.data() + 4, &self_.sin_port, 2);
  return a;
}

void UdpLink::connect(uint32_t peer, std::span<const uint8_t> address) {
  if (peer >= peers_.size()) throw std::runtime_error("tb5 udp: peer rank outside the job");
  if (address.size() != 6) throw std::runtime_error("tb5 udp: peer address of the wrong size (another backend?)");
  sockaddr_in& a = peers_[peer];
  a.sin_family = AF_INET;
  std::memcpy(&a.sin_addr, address.data(), 4);
  std::memcpy(&a.sin_port, address.data() + 4, 2);
}

void UdpLink::send(uint32_t peer, std::span<const uint8_t> frame) {
  // Best effort: a full socket buffer (EAGAIN) or an unreachable peer is a
  // lost frame, which the engine retransmits.
  (void)::sendto(fd_, frame.data(), frame.size(), 0, reinterpret_cast<const sockaddr*>(&peers_[peer]),
                 sizeof(sockaddr_in));
}

size_t UdpLink::poll(const std::function<void(std::span<const uint8_t>)>& on_frame, size_t max) {
  size_t n = 0;
  while (n < max) {
    const ssize_t got = ::recv(fd_, buf_.data(), buf_.size(), 0);
    if (got < 0) break;  // EAGAIN: drained (ECONNREFUSED from a closed peer: ignored too)
    ++n;
    on_frame({buf_.data(), size_t(got)});
  }
  return n;
}

std::string UdpLink::describe() const { return "udp " + to_string(self_); }

}  // namespace trillion::tb5
