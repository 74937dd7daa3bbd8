// The verbs entry points of the simulator (model: verbs_sim.hpp). Each is
// defined under a sim_ name and exported under the verbs name (asm label),
// since <infiniband/verbs.h> declares some of them with compatibility types
// or as macros.
#include <arpa/inet.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "transport/tb5/sim/verbs_sim.hpp"
#include "transport/tb5/udp/udp_link.hpp"

#define SIM_EXPORT(name) __asm__(name) __attribute__((visibility("default")))

using namespace trillion::tb5::sim;

namespace {

std::recursive_mutex g_mu;  // one lock for the whole simulated device
std::set<SimQp*> g_qps;
std::map<uint32_t, std::pair<uintptr_t, size_t>> g_mrs;  // lkey -> registered range
uint32_t g_next_key = 1;

uint32_t env_u32(const char* name, uint32_t dflt) {
  const char* v = std::getenv(name);
  return v && *v ? uint32_t(std::strtoul(v, nullptr, 10)) : dflt;
}

struct SimDevice {
  ibv_device dev{};
  in_addr ip{};
  SimDevice() {
    std::strcpy(dev.name, "sim_rdma0");
    std::strcpy(dev.dev_name, "uverbs_sim0");
    const char* spec = std::getenv("TB5_SIM_IF");
    ip = trillion::tb5::choose_ipv4(spec ? spec : "");
  }
};

SimDevice& device() {
  static SimDevice d;
  return d;
}

bool sge_registered(const ibv_sge& s) {
  auto it = g_mrs.find(s.lkey);
  return it != g_mrs.end() && s.addr >= it->second.first && s.addr + s.length <= it->second.first + it->second.second;
}

size_t sim_mtu() { return env_u32("TB5_SIM_MTU", 1024); }

int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  std::lock_guard lock(g_mu);
  SimQp& q = *reinterpret_cast<SimQp*>(qp);
  for (; wr; wr = wr->next) {
    *bad = wr;
    if (q.qp.state != IBV_QPS_RTS) return EINVAL;
    if (wr->opcode != IBV_WR_SEND && wr->opcode != IBV_WR_SEND_WITH_IMM) return EOPNOTSUPP;  // no RDMA WRITE/READ
    uint8_t buf[65536];
    size_t len = 0;
    for (int i = 0; i < wr->num_sge; ++i) {
      const ibv_sge& s = wr->sg_list[i];
      if (!(wr->send_flags & IBV_SEND_INLINE) && !sge_registered(s)) return EINVAL;
      if (len + s.length > sim_mtu()) return EINVAL;  // a SEND longer than the MTU
      std::memcpy(buf + len, reinterpret_cast<const void*>(s.addr), s.length);
      len += s.length;
    }
    wire_send(q, buf, len);
    if (wr->send_flags & IBV_SEND_SIGNALED) {
      ibv_wc wc{};
      wc.wr_id = wr->wr_id;
      wc.status = IBV_WC_SUCCESS;
      wc.opcode = IBV_WC_SEND;
      wc.qp_num = q.qp.qp_num;
      wc.byte_len = uint32_t(len);
      q.scq->done.push_back(wc);
    }
  }
  *bad = nullptr;
  return 0;
}

int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  std::lock_guard lock(g_mu);
  SimQp& q = *reinterpret_cast<SimQp*>(qp);
  for (; wr; wr = wr->next) {
    *bad = wr;
    if (q.qp.state == IBV_QPS_RESET) return EINVAL;
    if (q.rq.size() >= q.max_recv) return ENOMEM;  // Apple's stack: about 63
    if (wr->num_sge != 1 || !sge_registered(wr->sg_list[0])) return EINVAL;
    q.rq.push_back({wr->wr_id, wr->sg_list[0]});
  }
  *bad = nullptr;
  return 0;
}

int poll_cq(ibv_cq* cq, int n, ibv_wc* wc) {
  std::lock_guard lock(g_mu);
  SimCq& c = *reinterpret_cast<SimCq*>(cq);
  const double now = now_seconds();
  for (SimQp* q : g_qps) {
    release_due(*q, now);
    if (q->rcq == &c) receive_into(*q, now);
  }
  int k = 0;
  while (k < n && !c.done.empty()) {
    wc[k++] = c.done.front();
    c.done.pop_front();
  }
  return k;
}

}  // namespace

extern "C" {

ibv_device** sim_get_device_list(int* n) SIM_EXPORT("ibv_get_device_list");
ibv_device** sim_get_device_list(int* n) {
  auto** list = static_cast<ibv_device**>(std::calloc(2, sizeof(ibv_device*)));
  const bool none = env_u32("TB5_SIM_DEVICES", 1) == 0;
  if (!none) list[0] = &device().dev;
  if (n) *n = none ? 0 : 1;
  return list;
}

void sim_free_device_list(ibv_device** l) SIM_EXPORT("ibv_free_device_list");
void sim_free_device_list(ibv_device** l) { std::free(l); }

const char* sim_get_device_name(ibv_device* d) SIM_EXPORT("ibv_get_device_name");
const char* sim_get_device_name(ibv_device* d) { return d->name; }

ibv_context* sim_open_device(ibv_device* d) SIM_EXPORT("ibv_open_device");
ibv_context* sim_open_device(ibv_device* d) {
  auto* ctx = new ibv_context{};
  ctx->device = d;
  ctx->ops.post_send = post_send;
  ctx->ops.post_recv = post_recv;
  ctx->ops.poll_cq = poll_cq;
  return ctx;
}

int sim_close_device(ibv_context* c) SIM_EXPORT("ibv_close_device");
int sim_close_device(ibv_context* c) {
  delete c;
  return 0;
}

int sim_query_port(ibv_context*, uint8_t port, ibv_port_attr* a) SIM_EXPORT("ibv_query_port");
int sim_query_port(ibv_context*, uint8_t port, ibv_port_attr* a) {
  if (port != 1) return EINVAL;
  a->state = IBV_PORT_ACTIVE;
  a->max_mtu = IBV_MTU_1024;
  a->active_mtu = IBV_MTU_1024;
  a->gid_tbl_len = 2;
  a->lid = 0;
  a->link_layer = IBV_LINK_LAYER_ETHERNET;
  return 0;
}

int sim_query_gid(ibv_context*, uint8_t port, int index, ibv_gid* gid) SIM_EXPORT("ibv_query_gid");
int sim_query_gid(ibv_context*, uint8_t port, int index, ibv_gid* gid) {
  if (port != 1 || index < 0 || index > 1) return EINVAL;
  std::memset(gid->raw, 0, 16);
  gid->raw[10] = gid->raw[11] = 0xff;  // ::ffff:a.b.c.d, the interface's IPv4 address
  std::memcpy(gid->raw + 12, &device().ip, 4);
  return 0;
}

ibv_pd* sim_alloc_pd(ibv_context* c) SIM_EXPORT("ibv_alloc_pd");
ibv_pd* sim_alloc_pd(ibv_context* c) {
  auto* pd = new ibv_pd{};
  pd->context = c;
  return pd;
}

int sim_dealloc_pd(ibv_pd* pd) SIM_EXPORT("ibv_dealloc_pd");
int sim_dealloc_pd(ibv_pd* pd) {
  delete pd;
  return 0;
}

ibv_mr* sim_reg_mr(ibv_pd* pd, void* addr, size_t len, int access) SIM_EXPORT("ibv_reg_mr");
ibv_mr* sim_reg_mr(ibv_pd* pd, void* addr, size_t len, int access) {
  std::lock_guard lock(g_mu);
  auto* mr = new ibv_mr{};
  mr->context = pd->context;
  mr->pd = pd;
  mr->addr = addr;
  mr->length = len;
  mr->lkey = mr->rkey = g_next_key++;
  g_mrs[mr->lkey] = {reinterpret_cast<uintptr_t>(addr), len};
  return mr;
}

int sim_dereg_mr(ibv_mr* mr) SIM_EXPORT("ibv_dereg_mr");
int sim_dereg_mr(ibv_mr* mr) {
  std::lock_guard lock(g_mu);
  g_mrs.erase(mr->lkey);
  delete mr;
  return 0;
}

ibv_cq* sim_create_cq(ibv_context* c, int cqe, void*, ibv_comp_channel*, int) SIM_EXPORT("ibv_create_cq");
ibv_cq* sim_create_cq(ibv_context* c, int cqe, void*, ibv_comp_channel*, int) {
  auto* cq = new SimCq{};
  cq->cq.context = c;
  cq->cq.cqe = cqe;
  return &cq->cq;
}

int sim_destroy_cq(ibv_cq* cq) SIM_EXPORT("ibv_destroy_cq");
int sim_destroy_cq(ibv_cq* cq) {
  delete reinterpret_cast<SimCq*>(cq);
  return 0;
}

ibv_qp* sim_create_qp(ibv_pd* pd, ibv_qp_init_attr* a) SIM_EXPORT("ibv_create_qp");
ibv_qp* sim_create_qp(ibv_pd* pd, ibv_qp_init_attr* a) {
  std::lock_guard lock(g_mu);
  if (a->qp_type != IBV_QPT_UC) {  // Apple's stack: unreliable connected only
    errno = EOPNOTSUPP;
    return nullptr;
  }
  const uint32_t max_wr = env_u32("TB5_SIM_MAX_WR", 32), max_recv = env_u32("TB5_SIM_MAX_RECV", 63);
  if (a->cap.max_send_wr > max_wr || a->cap.max_recv_wr > max_recv || a->srq) {
    errno = EINVAL;
    return nullptr;
  }
  auto* q = new SimQp{};
  uint16_t port = 0;
  q->fd = open_qp_socket(device().ip, &port);
  if (q->fd < 0) {
    delete q;
    errno = ENOMEM;
    return nullptr;
  }
  q->qp.context = pd->context;
  q->qp.pd = pd;
  q->qp.send_cq = a->send_cq;
  q->qp.recv_cq = a->recv_cq;
  q->qp.qp_num = port;  // the QPN names the socket
  q->qp.qp_type = IBV_QPT_UC;
  q->qp.state = IBV_QPS_RESET;
  q->max_send = a->cap.max_send_wr;
  q->max_recv = std::min(a->cap.max_recv_wr, max_recv);
  q->scq = reinterpret_cast<SimCq*>(a->send_cq);
  q->rcq = reinterpret_cast<SimCq*>(a->recv_cq);
  g_qps.insert(q);
  return &q->qp;
}

int sim_destroy_qp(ibv_qp* qp) SIM_EXPORT("ibv_destroy_qp");
int sim_destroy_qp(ibv_qp* qp) {
  std::lock_guard lock(g_mu);
  auto* q = reinterpret_cast<SimQp*>(qp);
  g_qps.erase(q);
  ::close(q->fd);
  delete q;
  return 0;
}

int sim_modify_qp(ibv_qp* qp, ibv_qp_attr* a, int mask) SIM_EXPORT("ibv_modify_qp");
int sim_modify_qp(ibv_qp* qp, ibv_qp_attr* a, int mask) {
  std::lock_guard lock(g_mu);
  auto* q = reinterpret_cast<SimQp*>(qp);
  if (!(mask & IBV_QP_STATE)) return EINVAL;
  switch (a->qp_state) {
    case IBV_QPS_INIT:
      if (!(mask & IBV_QP_PORT) || a->port_num != 1) return EINVAL;
      if ((mask & IBV_QP_ACCESS_FLAGS) && (a->qp_access_flags & (IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)))
        return EOPNOTSUPP;
      break;
    case IBV_QPS_RTR: {
      if (q->qp.state != IBV_QPS_INIT) return EINVAL;
      const int need = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
      if ((mask & need) != need || !a->ah_attr.is_global) return EINVAL;
      if (a->path_mtu > IBV_MTU_1024) return EINVAL;
      const uint8_t* g = a->ah_attr.grh.dgid.raw;
      if (g[10] != 0xff || g[11] != 0xff) return EINVAL;  // the simulator routes IPv4-derived GIDs only
      q->dest.sin_family = AF_INET;
      std::memcpy(&q->dest.sin_addr, g + 12, 4);
      q->dest.sin_port = htons(uint16_t(a->dest_qp_num));
      break;
    }
    case IBV_QPS_RTS:
      if (q->qp.state != IBV_QPS_RTR || !(mask & IBV_QP_SQ_PSN)) return EINVAL;
      break;
    case IBV_QPS_RESET: q->rq.clear(); break;
    default: return EINVAL;
  }
  q->qp.state = a->qp_state;
  return 0;
}

// For tests: what the fault model did in this process.
__attribute__((visibility("default"))) void tb5_sim_counters(uint64_t out[6]) {
  std::lock_guard lock(g_mu);
  const Counters& c = counters();
  const uint64_t v[6] = {c.sends, c.lost, c.duplicated, c.reordered, c.stalls, c.no_receive_posted};
  std::memcpy(out, v, sizeof v);
}

}  // extern "C"
