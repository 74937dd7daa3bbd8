// The simulator's wire: UDP datagrams between queue-pair sockets, and the
// fault model applied to each SEND.
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>

#include "platform/socket.hpp"
#include "transport/tb5/sim/verbs_sim.hpp"

namespace trillion::tb5::sim {
namespace {

double env_double(const char* name, double dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::atof(v) : dflt;
}

struct Faults {
  double loss = env_double("TB5_SIM_LOSS", 0), duplicate = env_double("TB5_SIM_DUPLICATE", 0),
         reorder = env_double("TB5_SIM_REORDER", 0), stall = env_double("TB5_SIM_STALL", 0),
         stall_s = env_double("TB5_SIM_STALL_MS", 20) * 1e-3;
  std::mt19937_64 rng{uint64_t(env_double("TB5_SIM_SEED", 1)) * 7919 + uint64_t(getpid())};
  std::uniform_real_distribution<double> uni{0.0, 1.0};
  double draw() { return uni(rng); }
};

Faults& faults() {
  static Faults f;
  return f;
}

Counters g_counters;

void raw_send(SimQp& q, const uint8_t* data, size_t len) {
  (void)::sendto(q.fd, data, len, 0, reinterpret_cast<const sockaddr*>(&q.dest), sizeof q.dest);
}

}  // namespace

const Counters& counters() { return g_counters; }

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int open_qp_socket(in_addr ip, uint16_t* port) {
  int fd = platform::open_udp_socket();
  if (fd < 0) return -1;
  int size = 1 << 20;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr = ip;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

void release_due(SimQp& q, double now) {
  if (now < q.stalled_until) return;
  while (!q.wire.empty() && q.wire.front().due <= now) {
    raw_send(q, q.wire.front().bytes.data(), q.wire.front().bytes.size());
    q.wire.pop_front();
  }
}

void wire_send(SimQp& q, const uint8_t* data, size_t len) {
  Faults& f = faults();
  const double now = now_seconds();
  ++g_counters.sends;
  if (f.stall > 0 && f.draw() < f.stall) {  // the link hangs for a while, then resumes
    ++g_counters.stalls;
    q.stalled_until = now + f.stall_s;
  }
  if (f.draw() < f.loss) {
    ++g_counters.lost;
    return;
  }
  const int copies = f.draw() < f.duplicate ? 2 : 1;
  if (copies == 2) ++g_counters.duplicated;
  if (now < q.stalled_until) {  // queued behind the stall, in order
    for (int i = 0; i < copies; ++i) q.wire.push_back({q.stalled_until, {data, data + len}});
    return;
  }
  if (f.draw() < f.reorder) {  // held 1 ms: frames sent meanwhile overtake it
    ++g_counters.reordered;
    q.wire.push_back({now + 1e-3, {data, data + len}});
    return;
  }
  for (int i = 0; i < copies; ++i) raw_send(q, data, len);
  release_due(q, now);
}

void receive_into(SimQp& q, double now) {
  release_due(q, now);
  uint8_t buf[65536];
  for (;;) {
    const ssize_t got = ::recv(q.fd, buf, sizeof buf, 0);
    if (got < 0) return;
    if (q.rq.empty()) {  // UC: nothing posted, the SEND is lost
      ++g_counters.no_receive_posted;
      continue;
    }
    const Posted p = q.rq.front();
    q.rq.pop_front();
    ibv_wc wc{};
    wc.wr_id = p.wr_id;
    wc.opcode = IBV_WC_RECV;
    wc.qp_num = q.qp.qp_num;
    if (size_t(got) > p.sge.length) {
      wc.status = IBV_WC_LOC_LEN_ERR;
    } else {
      std::memcpy(reinterpret_cast<void*>(p.sge.addr), buf, size_t(got));
      wc.status = IBV_WC_SUCCESS;
      wc.byte_len = uint32_t(got);
    }
    q.rcq->done.push_back(wc);
    if (q.rq.empty()) return;  // what comes next waits for a posted receive (or is dropped then)
  }
}

}  // namespace trillion::tb5::sim
