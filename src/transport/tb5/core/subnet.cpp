#include "transport/tb5/core/subnet.hpp"

#include <arpa/inet.h>

#include <cstdlib>

#include "transport/tb5/core/link.hpp"

namespace trillion::tb5 {
namespace {

std::string list(std::span<const Ipv4Net> nets) {
  std::string s;
  for (const auto& n : nets) s += (s.empty() ? "" : ", ") + to_string(n);
  return s.empty() ? "none" : s;
}

}  // namespace

uint32_t Ipv4Net::mask() const { return prefix == 0 ? 0 : htonl(~uint32_t(0) << (32 - prefix)); }

std::string ipv4_string(uint32_t addr) {
  char ip[INET_ADDRSTRLEN] = "?";
  in_addr a{addr};
  inet_ntop(AF_INET, &a, ip, sizeof ip);
  return ip;
}

std::string to_string(const Ipv4Net& n) {
  return (n.name.empty() ? "" : n.name + " ") + ipv4_string(n.addr) + "/" + std::to_string(n.prefix);
}

std::optional<Ipv4Net> parse_ipv4_net(const std::string& s) {
  Ipv4Net n;
  const auto slash = s.find('/');
  in_addr a{};
  if (inet_pton(AF_INET, s.substr(0, slash).c_str(), &a) != 1) return std::nullopt;
  n.addr = a.s_addr;
  if (slash != std::string::npos) {
    char* end = nullptr;
    const long bits = std::strtol(s.c_str() + slash + 1, &end, 10);
    if (end == s.c_str() + slash + 1 || *end || bits < 0 || bits > 32) return std::nullopt;
    n.prefix = uint8_t(bits);
  }
  return n;
}

Path choose_path(std::span<const Ipv4Net> local, std::span<const Ipv4Net> remote, const std::string& peer) {
  std::optional<Path> best;
  bool ambiguous = false;
  for (size_t l = 0; l < local.size(); ++l)
    for (size_t r = 0; r < remote.size(); ++r) {
      if (!local[l].contains(remote[r].addr)) continue;
      if (!best || local[l].prefix > local[best->local].prefix) {
        best = Path{l, r};
        ambiguous = false;
      } else if (local[l].prefix == local[best->local].prefix && l != best->local) {
        ambiguous = true;
      }
    }
  if (!best)
    throw NoPath("no local device shares a subnet with " + peer + ": here " + list(local) + "; there " + list(remote));
  if (ambiguous)
    throw std::runtime_error("two local devices share a subnet with " + peer + " (here " + list(local) + "; there " +
                             list(remote) + "): give each cable its own subnet, e.g. a /30 per cable");
  return *best;
}

}  // namespace trillion::tb5
