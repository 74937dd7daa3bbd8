#include "transport/tb5/udp/udp_link.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
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

int prefix_of(uint32_t netmask) { return __builtin_popcount(netmask); }

// Address blob: port (2, network order), largest frame (4, little-endian),
// count (1), then per interface its address (4, network order) and prefix (1).
constexpr size_t head_bytes = 7, net_bytes = 5;

}  // namespace

std::vector<Ipv4Net> ipv4_interfaces(const std::string& spec) {
  std::vector<std::string> items;
  for (size_t at = 0; at <= spec.size();) {
    const size_t comma = std::min(spec.find(',', at), spec.size());
    if (comma > at) items.push_back(spec.substr(at, comma - at));
    at = comma + 1;
  }
  std::vector<Ipv4Net> wanted;  // addresses and subnets among the items
  for (const auto& item : items)
    if (auto n = parse_ipv4_net(item)) wanted.push_back(*n);
    else if (item.find_first_of("./") != std::string::npos && item.find_first_not_of("0123456789./") == std::string::npos)
      throw std::runtime_error("tb5 udp: btl_tb5_if_include '" + spec + "': '" + item + "' is not a valid IPv4 subnet");
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) throw sys_error("getifaddrs");
  std::vector<Ipv4Net> found, loopback;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
    Ipv4Net n;
    n.name = i->ifa_name;
    n.addr = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr;
    n.prefix = uint8_t(i->ifa_netmask ? prefix_of(reinterpret_cast<sockaddr_in*>(i->ifa_netmask)->sin_addr.s_addr) : 32);
    n.loopback = i->ifa_flags & IFF_LOOPBACK;
    if (items.empty()) {
      (i->ifa_flags & IFF_LOOPBACK ? loopback : found).push_back(n);
      continue;
    }
    bool take = std::find(items.begin(), items.end(), n.name) != items.end();
    for (const auto& w : wanted) {
      if (w.prefix == 32 && n.contains(w.addr)) {  // an address: this interface, at that address
        Ipv4Net at = n;
        at.addr = w.addr;
        found.push_back(at);
      } else if (w.prefix < 32 && w.contains(n.addr)) {
        take = true;
      }
    }
    if (take) found.push_back(n);
  }
  freeifaddrs(list);
  if (items.empty() && found.empty()) found = loopback;
  // An interface named twice (by name and by subnet) is used once.
  std::vector<Ipv4Net> unique;
  for (const auto& n : found)
    if (std::none_of(unique.begin(), unique.end(), [&](const Ipv4Net& u) { return u.name == n.name && u.addr == n.addr; }))
      unique.push_back(n);
  found.swap(unique);
  if (found.empty())
    throw std::runtime_error("tb5 udp: btl_tb5_if_include '" + spec +
                             "' names no IPv4 interface that is up on this host (give interface names, addresses or subnets)");
  return found;
}

in_addr choose_ipv4(const std::string& spec) { return in_addr{ipv4_interfaces(spec).front().addr}; }

namespace {

// addr with the prefix of the interface whose subnet holds it (/32 if none).
std::vector<Ipv4Net> at_address(in_addr addr) {
  try {
    for (const auto& n : ipv4_interfaces(ipv4_string(addr.s_addr)))
      if (n.addr == addr.s_addr) return {n};
  } catch (const std::runtime_error&) {
  }
  return {Ipv4Net{addr.s_addr, 32, ""}};
}

}  // namespace

UdpLink::UdpLink(in_addr addr, size_t mtu, uint32_t nranks) : UdpLink(at_address(addr), mtu, nranks) {}

UdpLink::UdpLink(std::vector<Ipv4Net> ifs, size_t mtu, uint32_t nranks)
    : mtu_(mtu), ifs_(std::move(ifs)), peers_(nranks), buf_(mtu + 1) {
  if (mtu < 64 || mtu > 65507) throw std::invalid_argument("tb5 udp: MTU must be 64..65507 bytes");
  if (ifs_.empty()) throw std::invalid_argument("tb5 udp: no interface");
  for (auto& p : peers_) p.frame = mtu_;
  fd_ = platform::open_udp_socket();
  if (fd_ < 0) throw sys_error("socket");
  // Generous kernel buffers: a window from every peer must fit while this
  // rank computes instead of polling.
  int size = 4 << 20;
  setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
  socklen_t optlen = sizeof size;
  if (getsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &size, &optlen) == 0) rcvbuf_ = size_t(size);
  self_.sin_family = AF_INET;
  // One interface: its address. Several (a cable per peer): every address,
  // so one socket serves them all.
  self_.sin_addr.s_addr = ifs_.size() == 1 ? ifs_[0].addr : htonl(INADDR_ANY);
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
  std::vector<uint8_t> a(head_bytes + net_bytes * ifs_.size());
  std::memcpy(a.data(), &self_.sin_port, 2);
  for (int i = 0; i < 4; ++i) a[2 + i] = uint8_t(mtu_ >> (8 * i));
  a[6] = uint8_t(ifs_.size());
  for (size_t i = 0; i < ifs_.size(); ++i) {
    std::memcpy(a.data() + head_bytes + net_bytes * i, &ifs_[i].addr, 4);
    a[head_bytes + net_bytes * i + 4] = ifs_[i].prefix;
  }
  return a;
}

void UdpLink::connect(uint32_t peer, std::span<const uint8_t> address) {
  if (peer >= peers_.size()) throw std::runtime_error("tb5 udp: peer rank outside the job");
  if (address.size() < head_bytes || address.size() != head_bytes + net_bytes * address[6])
    throw std::runtime_error("tb5 udp: peer address of the wrong size (another backend?)");
  std::vector<Ipv4Net> theirs(address[6]);
  for (size_t i = 0; i < theirs.size(); ++i) {
    std::memcpy(&theirs[i].addr, address.data() + head_bytes + net_bytes * i, 4);
    theirs[i].prefix = address[head_bytes + net_bytes * i + 4];
  }
  const Path path = choose_path(ifs_, theirs, "rank " + std::to_string(peer));
  Peer& p = peers_[peer];
  p.to.sin_family = AF_INET;
  p.to.sin_addr.s_addr = theirs[path.remote].addr;
  std::memcpy(&p.to.sin_port, address.data(), 2);
  uint32_t their_mtu = 0;
  for (int i = 3; i >= 0; --i) their_mtu = (their_mtu << 8) | address[2 + i];
  p.frame = std::min<size_t>(mtu_, their_mtu);
  for (const auto& n : theirs) senders_.emplace_back(n.addr, p.to.sin_port);
  if (p.frame < 64) throw std::runtime_error("tb5 udp: peer's frames are smaller than 64 bytes");
}

void UdpLink::send_parts(uint32_t peer, std::span<const uint8_t> head, std::span<const uint8_t> body,
                         std::span<const uint8_t> body2) {
  // Gathered from where header and payload lie: the kernel's copy is the
  // only one. Best effort: a full socket buffer (EAGAIN) or an unreachable
  // peer is a lost frame, which the engine retransmits.
  iovec iov[3] = {{const_cast<uint8_t*>(head.data()), head.size()}};
  size_t n = 1;
  for (auto part : {body, body2})
    if (!part.empty()) iov[n++] = {const_cast<uint8_t*>(part.data()), part.size()};
  msghdr m{};
  m.msg_name = &peers_[peer].to;
  m.msg_namelen = sizeof(sockaddr_in);
  m.msg_iov = iov;
  m.msg_iovlen = n;
  (void)::sendmsg(fd_, &m, 0);
}

size_t UdpLink::poll(const std::function<void(std::span<const uint8_t>)>& on_frame, size_t max) {
  size_t n = 0;
  while (n < max) {
    sockaddr_in from{};
    socklen_t from_len = sizeof from;
    const ssize_t got = ::recvfrom(fd_, buf_.data(), buf_.size(), 0, reinterpret_cast<sockaddr*>(&from), &from_len);
    if (got < 0) break;  // EAGAIN: drained (ECONNREFUSED from a closed peer: ignored too)
    const std::pair<uint32_t, uint16_t> source{from.sin_addr.s_addr, from.sin_port};
    if (std::find(senders_.begin(), senders_.end(), source) == senders_.end()) {
      ++strangers_;
      continue;
    }
    ++n;
    on_frame({buf_.data(), size_t(got)});
  }
  return n;
}

std::string UdpLink::describe() const {
  std::string s = "udp " + to_string(self_);
  if (ifs_.size() > 1) {
    s += " (";
    for (size_t i = 0; i < ifs_.size(); ++i) s += (i ? ", " : "") + trillion::tb5::to_string(ifs_[i]);
    s += ")";
  }
  return s;
}

}  // namespace trillion::tb5
