// The verbs simulator's model (libtb5_verbs_sim.so). One device, "sim_rdma0",
// whose GID is the IPv4-mapped address of an interface (TB5_SIM_IF: a name
// or an address; default: as btl_tb5_if_include), like Apple's stack. Each
// queue pair is a UDP socket on that address and its number is the port, so
// a (GID, QPN) pair names a socket in any process or network namespace.
//
// Apple's constraints, enforced: UC queue pairs only (RC/UD: EOPNOTSUPP),
// SEND/RECV only (RDMA WRITE/READ: EOPNOTSUPP), MTU 1024 (a longer SEND:
// EINVAL), at most TB5_SIM_MAX_WR (32) send work requests, and
// ibv_post_recv failing with ENOMEM beyond TB5_SIM_MAX_RECV (63) posted
// receives. A SEND arriving when no receive is posted is dropped, as UC does.
//
// Faults, per SEND, from the environment: TB5_SIM_LOSS, TB5_SIM_DUPLICATE,
// TB5_SIM_REORDER (held behind the next), TB5_SIM_STALL with TB5_SIM_STALL_MS
// (the queue pair sends nothing for that long, then all at once),
// TB5_SIM_SEED. TB5_SIM_DEVICES=0 lists no device (the "no RDMA device" path).
#pragma once
#include <infiniband/verbs.h>
#include <netinet/in.h>

#include <cstdint>
#include <deque>
#include <vector>

namespace trillion::tb5::sim {

struct Posted {
  uint64_t wr_id;
  ibv_sge sge;
};

struct Delayed {
  double due;
  std::vector<uint8_t> bytes;
};

struct SimCq;

struct SimQp {
  ibv_qp qp{};  // first: the backend holds ibv_qp*
  int fd = -1;
  sockaddr_in dest{};
  uint32_t max_send = 0, max_recv = 0;
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
};

// Socket-level pieces (sim_qp.cpp).
int open_qp_socket(in_addr ip, uint16_t* port);
void wire_send(SimQp& q, const uint8_t* data, size_t len);  // the fault model
void release_due(SimQp& q, double now);
void receive_into(SimQp& q, double now);
double now_seconds();
const Counters& counters();

}  // namespace trillion::tb5::sim
