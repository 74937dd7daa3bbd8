// The verbs simulator's model (libtb5_verbs_sim.so): the verbs subset the
// tb5 backend calls, between processes (or network namespaces) over UDP
// sockets, behaving as Apple's RDMA over Thunderbolt does (TB5_SIM_PROFILE=
// apple, the default) or as a Linux RoCE adapter (roce).
//
// Devices. With TB5_SIM_WIRING, the cables: a file of lines
//   HOST DEVICE ADDRESS/PREFIX   HOST DEVICE ADDRESS/PREFIX
// (one cable, both ends), or mesh:N (hosts h0..hN-1, every pair cabled,
// device rdma_enJ of host hI leading to host hJ, 127.21.K.1/30 and .2/30 for
// the K-th pair). This process is host TB5_SIM_HOST ("{rank}" in it becomes
// its MPI rank; default: the host name) and has that host's cable ends as
// devices. A device reaches only the other end of its cable: frames to or
// from any other address vanish (counted "misrouted"). Without
// TB5_SIM_WIRING: one device, sim_rdma0, on TB5_SIM_IF (a name, address or
// subnet; default as btl_tb5_if_include), reaching any address — ranks of
// one host sharing one device, which a real cable never gives.
// TB5_SIM_DEVICES=0: no device (a Mac with RDMA off).
//
// Each queue pair is a UDP socket on its device's address, its number the
// port, so a (GID, QPN) pair names a socket in any process or namespace.
//
// Apple's behaviour, each limit overridable: UC queue pairs only (RC/UD:
// EOPNOTSUPP), SEND/RECV only (RDMA WRITE/READ: EOPNOTSUPP); path MTU 1024
// (RTR asking more: EINVAL); SENDs up to TB5_SIM_MAX_MSG (4096, reported as
// the port's max_msg_sz; longer: EINVAL); TB5_SIM_MAX_WR (32) send work
// requests outstanding per queue pair, counted on every post until the
// completion is polled (ENOMEM past it); TB5_SIM_MAX_RECV (63) posted
// receives (ENOMEM past it); TB5_SIM_MAX_QP (10) queue pairs and
// TB5_SIM_MAX_MR (8) memory regions per device (ENOMEM), both reported by
// ibv_query_device; the GID table: fe80::/64 link-local at index 0, the
// IPv4-mapped ::ffff:a.b.c.d at 1, zeros after (16 entries reported), and an
// RTR whose source GID is not IPv4-mapped fails with ETIMEDOUT (it routes
// elsewhere). UC receives are consumed as SENDs arrive: a SEND that arrives
// when no receive is posted is dropped (counted "no_receive_posted"), even
// if tb5 posts one before it next polls (see sim_qp.cpp for how arrival
// time is kept without a thread). An error completion moves the queue pair
// to the error state: later and posted work requests complete flushed.
//
// Faults, per SEND: TB5_SIM_LOSS, TB5_SIM_DUPLICATE, TB5_SIM_REORDER (held
// 1 ms, so later ones overtake it), TB5_SIM_STALL with TB5_SIM_STALL_MS (the
// queue pair sends nothing for that long, then all at once; its completions
// wait too), TB5_SIM_SEND_ERROR (an error completion), TB5_SIM_SEED.
// tb5_sim_counter(name) reads what happened in this process.
#pragma once
#include <infiniband/verbs.h>
#include <netinet/in.h>

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace trillion::tb5::sim {

struct Limits {
  uint32_t max_qp = 10, max_mr = 8, max_wr = 32, max_recv = 63, max_msg = 4096;
  ibv_mtu path_mtu = IBV_MTU_1024;
  int ipv4_gid_index = 1;  // the GID table: fe80 link-local before it, IPv4-mapped at it
  int gid_tbl_len = 16;
};

struct SimDevice {
  ibv_device dev{};  // first: the backend holds ibv_device*
  std::string host;
  in_addr ip{};
  uint8_t prefix = 32;
  bool wired = false;  // a cable: reaches only `peer`
  in_addr peer{};
  Limits limits;
  uint32_t qps = 0, mrs = 0;  // open in this process
};

struct Posted {
  uint64_t wr_id;
  ibv_sge sge;
  int64_t posted_ns;  // CLOCK_REALTIME, as the sockets' arrival stamps
};

struct Delayed {
  double due;
  std::vector<uint8_t> bytes;
  uint64_t wr_id;  // UINT64_MAX: a duplicate, no completion of its own
  bool signaled;
  bool on_wire = true;  // false: lost, only its completion waits its turn
};

struct SimCq;

struct SimQp {
  ibv_qp qp{};  // first: the backend holds ibv_qp*
  SimDevice* device = nullptr;
  int fd = -1;
  sockaddr_in dest{};
  uint32_t max_send = 0, max_recv = 0;
  uint32_t sq_outstanding = 0, sq_unsignaled = 0;  // posted, completion not yet polled
  std::deque<Posted> rq;
  SimCq* scq = nullptr;
  SimCq* rcq = nullptr;
  std::deque<Delayed> wire;  // held (reordered or stalled) frames, in order of release
  double stalled_until = 0;
};

struct SimCq {
  ibv_cq cq{};
  std::deque<ibv_wc> done;
};

struct Counters {
  uint64_t sends = 0, lost = 0, duplicated = 0, reordered = 0, stalls = 0, no_receive_posted = 0;
  uint64_t misrouted = 0, send_errors = 0, flushed = 0, sq_full = 0;
};
Counters& counters();

// The configuration (sim_config.cpp): the profile's limits, this process's
// host, and its devices (kept for the life of the process).
Limits profile_limits();
std::vector<SimDevice*> host_devices();
uint32_t env_u32(const char* name, uint32_t dflt);

// The wire (sim_qp.cpp): sockets, the fault model, arrival-time receives.
int open_qp_socket(in_addr ip, uint16_t* port);
void wire_send(SimQp& q, const uint8_t* data, size_t len, uint64_t wr_id, bool signaled);
void release_due(SimQp& q, double now);
void drain(SimQp& q);  // takes what has arrived, each against the receives posted before it
void to_error(SimQp& q);  // the error state: posted receives complete flushed
double now_seconds();
int64_t realtime_ns();

}  // namespace trillion::tb5::sim
