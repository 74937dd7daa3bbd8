// The simulator's wire: UDP datagrams between queue-pair sockets, the fault
// model applied to each SEND, and UC receives at arrival time.
//
// Arrival time without a thread: a UC receiver takes a SEND into the receive
// that was first in its queue when the SEND arrived, or drops it if none
// was posted then. Each socket stamps every datagram with its arrival time
// (SO_TIMESTAMPNS, kernel time; SO_TIMESTAMP on macOS), each posted receive records when it was
// posted (the same clock), and the queue pair's socket is drained — each
// datagram matched against the receives posted before it arrived — before
// any receive is posted and whenever its completion queue is polled. So a
// SEND that found no receive is dropped even when tb5 posts one before
// reading it, exactly as on the hardware, without a receiver thread taking
// the cores the ranks run on; only the moment a completion becomes visible
// differs (when polled, not when the frame landed), which tb5 cannot tell
// from a slow poll.
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>

#include "platform/socket.hpp"
#include "transport/tb5/sim/verbs_sim.hpp"

namespace trillion::tb5::sim {
// The kernel's arrival stamp: nanoseconds on Linux (SO_TIMESTAMPNS);
// macOS has only SO_TIMESTAMP (microseconds, the same realtime clock), which
// orders arrivals against posts as well at the simulator's time scales.
#ifdef SO_TIMESTAMPNS
using ArrivalStamp = timespec;
constexpr int kArrivalStamp = SO_TIMESTAMPNS, kArrivalStampMsg = SCM_TIMESTAMPNS;
inline int64_t stamp_ns(const timespec& t) { return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec; }
#else
using ArrivalStamp = timeval;
constexpr int kArrivalStamp = SO_TIMESTAMP, kArrivalStampMsg = SCM_TIMESTAMP;
inline int64_t stamp_ns(const timeval& t) { return int64_t(t.tv_sec) * 1000000000 + int64_t(t.tv_usec) * 1000; }
#endif

namespace {

double env_double(const char* name, double dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::atof(v) : dflt;
}

struct Faults {
  double loss = env_double("TB5_SIM_LOSS", 0), duplicate = env_double("TB5_SIM_DUPLICATE", 0),
         reorder = env_double("TB5_SIM_REORDER", 0), stall = env_double("TB5_SIM_STALL", 0),
         stall_s = env_double("TB5_SIM_STALL_MS", 20) * 1e-3, send_error = env_double("TB5_SIM_SEND_ERROR", 0);
  std::mt19937_64 rng{uint64_t(env_double("TB5_SIM_SEED", 1)) * 7919 + uint64_t(getpid())};
  std::uniform_real_distribution<double> uni{0.0, 1.0};
  double draw() { return uni(rng); }
};

Faults& faults() {
  static Faults f;
  return f;
}

Counters g_counters;

void complete_send(SimQp& q, uint64_t wr_id, bool signaled, size_t len, ibv_wc_status status) {
  if (!signaled && status == IBV_WC_SUCCESS) {
    ++q.sq_unsignaled;  // its slot frees with the next signaled completion polled
    return;
  }
  ibv_wc wc{};
  wc.wr_id = wr_id;
  wc.status = status;
  wc.opcode = IBV_WC_SEND;
  wc.qp_num = q.qp.qp_num;
  wc.byte_len = uint32_t(len);
  q.scq->done.push_back(wc);
}

void raw_send(SimQp& q, const uint8_t* data, size_t len) {
  // A cable reaches only the host at its other end.
  if (q.device->wired && q.dest.sin_addr.s_addr != q.device->peer.s_addr) {
    ++g_counters.misrouted;
    return;
  }
  (void)::sendto(q.fd, data, len, 0, reinterpret_cast<const sockaddr*>(&q.dest), sizeof q.dest);
}

}  // namespace

Counters& counters() { return g_counters; }

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int64_t realtime_ns() {
  timespec t{};
  clock_gettime(CLOCK_REALTIME, &t);
  return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
}

int open_qp_socket(in_addr ip, uint16_t* port) {
  int fd = platform::open_udp_socket();
  if (fd < 0) return -1;
  int size = 1 << 20;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  int on = 1;
  setsockopt(fd, SOL_SOCKET, kArrivalStamp, &on, sizeof on);  // arrival times (see above)
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
    Delayed& d = q.wire.front();
    if (d.on_wire) raw_send(q, d.bytes.data(), d.bytes.size());
    if (d.wr_id != UINT64_MAX) complete_send(q, d.wr_id, d.signaled, d.bytes.size(), IBV_WC_SUCCESS);
    q.wire.pop_front();
  }
}

void wire_send(SimQp& q, const uint8_t* data, size_t len, uint64_t wr_id, bool signaled) {
  Faults& f = faults();
  const double now = now_seconds();
  ++g_counters.sends;
  if (f.send_error > 0 && f.draw() < f.send_error) {  // an error completion: the queue pair breaks
    ++g_counters.send_errors;
    complete_send(q, wr_id, true, len, IBV_WC_GENERAL_ERR);
    to_error(q);
    return;
  }
  if (f.stall > 0 && f.draw() < f.stall) {  // the link hangs for a while, then resumes
    ++g_counters.stalls;
    q.stalled_until = now + f.stall_s;
  }
  if (f.draw() < f.loss) {  // lost on the wire: the sender cannot tell (UC)
    ++g_counters.lost;
    if (now < q.stalled_until || !q.wire.empty())
      q.wire.push_back({now, {}, wr_id, signaled, false});  // its completion waits its turn
    else
      complete_send(q, wr_id, signaled, len, IBV_WC_SUCCESS);
    return;
  }
  const int copies = f.draw() < f.duplicate ? 2 : 1;
  if (copies == 2) ++g_counters.duplicated;
  if (now < q.stalled_until) {  // queued behind the stall, in order, its completion too
    for (int i = 0; i < copies; ++i)
      q.wire.push_back({q.stalled_until, {data, data + len}, i == 0 ? wr_id : UINT64_MAX, signaled});
    return;
  }
  if (f.draw() < f.reorder) {  // held 1 ms: frames sent meanwhile overtake it
    ++g_counters.reordered;
    q.wire.push_back({now + 1e-3, {data, data + len}, wr_id, signaled});
    return;
  }
  for (int i = 0; i < copies; ++i) raw_send(q, data, len);
  complete_send(q, wr_id, signaled, len, IBV_WC_SUCCESS);
  release_due(q, now);
}

void to_error(SimQp& q) {
  q.qp.state = IBV_QPS_ERR;
  for (const Posted& p : q.rq) {
    ibv_wc wc{};
    wc.wr_id = p.wr_id;
    wc.status = IBV_WC_WR_FLUSH_ERR;
    wc.opcode = IBV_WC_RECV;
    wc.qp_num = q.qp.qp_num;
    q.rcq->done.push_back(wc);
    ++g_counters.flushed;
  }
  q.rq.clear();
}

void drain(SimQp& q) {
  static uint8_t buf[65536];  // under the simulator's lock
  for (;;) {
    sockaddr_in from{};
    iovec iov{buf, sizeof buf};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ArrivalStamp))];
    msghdr m{};
    m.msg_name = &from;
    m.msg_namelen = sizeof from;
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = control;
    m.msg_controllen = sizeof control;
    const ssize_t got = ::recvmsg(q.fd, &m, 0);
    if (got < 0) return;
    int64_t arrived = realtime_ns();
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == kArrivalStampMsg) {
        ArrivalStamp t;
        std::memcpy(&t, CMSG_DATA(c), sizeof t);
        arrived = stamp_ns(t);
      }
    if (q.device->wired && from.sin_addr.s_addr != q.device->peer.s_addr) {  // not from the cable's other end
      ++g_counters.misrouted;
      continue;
    }
    // UC: no receive posted when it arrived (or the queue pair not ready to
    // receive): the SEND is lost.
    const bool ready = q.qp.state == IBV_QPS_RTR || q.qp.state == IBV_QPS_RTS;
    if (!ready || q.rq.empty() || q.rq.front().posted_ns > arrived) {
      ++g_counters.no_receive_posted;
      continue;
    }
    const Posted p = q.rq.front();
    q.rq.pop_front();
    ibv_wc wc{};
    wc.wr_id = p.wr_id;
    wc.opcode = IBV_WC_RECV;
    wc.qp_num = q.qp.qp_num;
    if (size_t(got) > p.sge.length) {  // longer than the receive: an error, and the queue pair breaks
      wc.status = IBV_WC_LOC_LEN_ERR;
      q.rcq->done.push_back(wc);
      to_error(q);
      continue;
    }
    std::memcpy(reinterpret_cast<void*>(p.sge.addr), buf, size_t(got));
    wc.status = IBV_WC_SUCCESS;
    wc.byte_len = uint32_t(got);
    q.rcq->done.push_back(wc);
  }
}

}  // namespace trillion::tb5::sim
