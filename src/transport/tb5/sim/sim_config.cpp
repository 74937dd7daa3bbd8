// The simulator's configuration from the environment (verbs_sim.hpp): the
// profile's limits, which host this process is, and that host's devices from
// the wiring. Read at every ibv_get_device_list, so a test may be one host,
// then another, in one process; devices live as long as the process (a
// context points to one).
#include <arpa/inet.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "transport/tb5/core/subnet.hpp"
#include "transport/tb5/sim/verbs_sim.hpp"
#include "transport/tb5/udp/udp_link.hpp"

namespace trillion::tb5::sim {
namespace {

struct End {
  std::string host, device;
  Ipv4Net net;
};

[[noreturn]] void bad(const std::string& what) { throw std::runtime_error("tb5 simulator: " + what); }

std::string env_str(const char* name, const char* dflt = "") {
  const char* v = std::getenv(name);
  return v && *v ? v : dflt;
}

// This process's host: TB5_SIM_HOST with "{rank}" replaced by the MPI rank
// (one simulated host per rank on one real host), else the host name.
std::string this_host() {
  std::string h = env_str("TB5_SIM_HOST");
  if (h.empty()) {
    char name[256] = "";
    gethostname(name, sizeof name - 1);
    return name;
  }
  const auto at = h.find("{rank}");
  if (at != std::string::npos) {
    std::string rank = env_str("OMPI_COMM_WORLD_RANK", env_str("PMIX_RANK", "0").c_str());
    h.replace(at, 6, rank);
  }
  return h;
}

// Both ends of every cable.
std::vector<std::pair<End, End>> cables(const std::string& wiring) {
  std::vector<std::pair<End, End>> out;
  if (wiring.rfind("mesh:", 0) == 0) {
    const int n = std::atoi(wiring.c_str() + 5);
    if (n < 2 || n > 64) bad("TB5_SIM_WIRING=" + wiring + ": a mesh of 2..64 hosts");
    uint32_t k = 0;  // the pair's number: its /30 is 127.21.0.0 + 4k
    for (int i = 0; i < n; ++i)
      for (int j = i + 1; j < n; ++j, ++k) {
        auto end = [k](int host, int peer, uint32_t last) {
          End e;
          e.host = "h";  // (appended, not "h" + ...: GCC 12 warns falsely on that)
          e.host += std::to_string(host);
          e.device = "rdma_en";
          e.device += std::to_string(peer);
          e.net.addr = htonl((127u << 24 | 21u << 16) + 4 * k + last);
          e.net.prefix = 30;
          return e;
        };
        out.emplace_back(end(i, j, 1), end(j, i, 2));
      }
    return out;
  }
  std::ifstream f(wiring);
  if (!f) bad("cannot read TB5_SIM_WIRING file " + wiring);
  std::string line;
  for (int no = 1; std::getline(f, line); ++no) {
    if (const auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream in(line);
    std::string w[6];
    int got = 0;
    while (got < 6 && in >> w[got]) ++got;
    if (got == 0) continue;
    std::string extra;
    if (got != 6 || in >> extra)
      bad(wiring + ":" + std::to_string(no) + ": a cable is HOST DEVICE ADDRESS/PREFIX HOST DEVICE ADDRESS/PREFIX");
    End e[2];
    for (int s = 0; s < 2; ++s) {
      auto net = parse_ipv4_net(w[3 * s + 2]);
      if (!net || w[3 * s + 2].find('/') == std::string::npos)
        bad(wiring + ":" + std::to_string(no) + ": '" + w[3 * s + 2] + "' is not ADDRESS/PREFIX");
      e[s] = End{w[3 * s], w[3 * s + 1], *net};
    }
    out.emplace_back(e[0], e[1]);
  }
  return out;
}

std::map<std::string, std::unique_ptr<SimDevice>>& registry() {
  static std::map<std::string, std::unique_ptr<SimDevice>> devices;  // by host/device
  return devices;
}

SimDevice* device(const std::string& host, const std::string& name) {
  auto& d = registry()[host + "/" + name];
  if (!d) {
    d = std::make_unique<SimDevice>();
    std::snprintf(d->dev.name, sizeof d->dev.name, "%s", name.c_str());
    std::snprintf(d->dev.dev_name, sizeof d->dev.dev_name, "uverbs_%s", name.c_str());
    d->host = host;
  }
  return d.get();
}

}  // namespace

uint32_t env_u32(const char* name, uint32_t dflt) {
  const char* v = std::getenv(name);
  return v && *v ? uint32_t(std::strtoul(v, nullptr, 10)) : dflt;
}

Limits profile_limits() {
  const std::string profile = env_str("TB5_SIM_PROFILE", "apple");
  Limits l;  // apple
  if (profile == "roce") {
    // A Linux RoCE adapter's: generous limits, the table rdma-core shows
    // (RoCE v1 and v2 link-local at 0 and 1, IPv4-mapped at 2 and 3).
    l.max_qp = 65536, l.max_mr = 65536, l.max_wr = 8192, l.max_recv = 8192, l.max_msg = 1u << 30;
    l.path_mtu = IBV_MTU_4096;
    l.ipv4_gid_index = 2;
  } else if (profile != "apple") {
    bad("TB5_SIM_PROFILE='" + profile + "': apple or roce");
  }
  l.max_qp = env_u32("TB5_SIM_MAX_QP", l.max_qp);
  l.max_mr = env_u32("TB5_SIM_MAX_MR", l.max_mr);
  l.max_wr = env_u32("TB5_SIM_MAX_WR", l.max_wr);
  l.max_recv = env_u32("TB5_SIM_MAX_RECV", l.max_recv);
  l.max_msg = env_u32("TB5_SIM_MAX_MSG", l.max_msg);
  return l;
}

std::vector<SimDevice*> host_devices() {
  std::vector<SimDevice*> out;
  if (env_u32("TB5_SIM_DEVICES", 1) == 0) return out;
  const Limits limits = profile_limits();
  const std::string wiring = env_str("TB5_SIM_WIRING");
  if (wiring.empty()) {
    SimDevice* d = device("", "sim_rdma0");
    const Ipv4Net n = trillion::tb5::ipv4_interfaces(env_str("TB5_SIM_IF")).front();
    d->ip.s_addr = n.addr, d->prefix = n.prefix, d->wired = false;
    d->limits = limits;
    out.push_back(d);
    return out;
  }
  const std::string host = this_host();
  for (const auto& [a, b] : cables(wiring))
    for (const auto& [me, other] : {std::pair{a, b}, std::pair{b, a}}) {
      if (me.host != host) continue;
      SimDevice* d = device(host, me.device);
      d->ip.s_addr = me.net.addr, d->prefix = me.net.prefix;
      d->wired = true;
      d->peer.s_addr = other.net.addr;
      d->limits = limits;
      out.push_back(d);
    }
  return out;
}

}  // namespace trillion::tb5::sim
