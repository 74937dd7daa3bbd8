// The verbs entry points of the simulator (model: verbs_sim.hpp). Each is
// defined under a sim_ name and exported under the verbs name (asm label),
// since <infiniband/verbs.h> declares some of them with compatibility types
// or as macros.
#include <arpa/inet.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "transport/tb5/sim/verbs_sim.hpp"

#define SIM_EXPORT(name) __asm__(name) __attribute__((visibility("default")))

using namespace trillion::tb5::sim;

namespace {

std::recursive_mutex g_mu;  // one lock for the whole simulation in this process
std::set<SimQp*> g_qps;
struct Region {
  uintptr_t addr;
  size_t len;
  SimDevice* device;
};
std::map<uint32_t, Region> g_mrs;  // lkey -> registered range
uint32_t g_next_key = 1;

SimDevice& device_of(ibv_context* c) { return *reinterpret_cast<SimDevice*>(c->device); }

bool sge_registered(const ibv_sge& s) {
  auto it = g_mrs.find(s.lkey);
  return it != g_mrs.end() && s.addr >= it->second.addr && s.addr + s.length <= it->second.addr + it->second.len;
}

// Entry `index` of a device's GID table: link-local entries before the
// IPv4-mapped ones (Apple: one of each; RoCE: two of each), zeros after.
bool gid_entry(const SimDevice& d, int index, ibv_gid* gid) {
  if (index < 0 || index >= d.limits.gid_tbl_len) return false;
  std::memset(gid->raw, 0, 16);
  const int v4 = d.limits.ipv4_gid_index, count = v4;  // as many IPv4-mapped entries as link-local ones
  if (index < v4) {
    gid->raw[0] = 0xfe, gid->raw[1] = 0x80;  // fe80::/64, an interface id made from the address
    std::memcpy(gid->raw + 12, &d.ip, 4);
    gid->raw[8] = 0x02, gid->raw[11] = 0xff, gid->raw[12] ^= uint8_t(index + 1);
  } else if (index < v4 + count) {
    gid->raw[10] = gid->raw[11] = 0xff;  // ::ffff:a.b.c.d
    std::memcpy(gid->raw + 12, &d.ip, 4);
  }
  return true;
}

bool ipv4_mapped(const uint8_t* g) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(g, prefix, 12) == 0;
}

// A work request posted to a queue pair in the error state completes at
// once with a flush error, as a device's would.
void flush(SimQp& q, SimCq& cq, uint64_t wr_id, ibv_wc_opcode opcode) {
  ibv_wc wc{};
  wc.wr_id = wr_id;
  wc.status = IBV_WC_WR_FLUSH_ERR;
  wc.opcode = opcode;
  wc.qp_num = q.qp.qp_num;
  cq.done.push_back(wc);
  ++counters().flushed;
}

int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  std::lock_guard lock(g_mu);
  SimQp& q = *reinterpret_cast<SimQp*>(qp);
  release_due(q, now_seconds());
  for (; wr; wr = wr->next) {
    *bad = wr;
    if (q.qp.state != IBV_QPS_RTS && q.qp.state != IBV_QPS_ERR) return EINVAL;
    if (wr->opcode != IBV_WR_SEND && wr->opcode != IBV_WR_SEND_WITH_IMM) return EOPNOTSUPP;  // no RDMA WRITE/READ
    // The send queue's depth, on every post: a work request holds its place
    // until its completion is polled.
    if (q.sq_outstanding >= q.max_send) {
      ++counters().sq_full;
      return ENOMEM;
    }
    uint8_t buf[65536];
    size_t len = 0;
    for (int i = 0; i < wr->num_sge; ++i) {
      const ibv_sge& s = wr->sg_list[i];
      if (!(wr->send_flags & IBV_SEND_INLINE) && !sge_registered(s)) return EINVAL;
      if (len + s.length > q.device->limits.max_msg || len + s.length > sizeof buf) return EINVAL;
      std::memcpy(buf + len, reinterpret_cast<const void*>(s.addr), s.length);
      len += s.length;
    }
    ++q.sq_outstanding;
    const bool signaled = wr->send_flags & IBV_SEND_SIGNALED;
    if (q.qp.state == IBV_QPS_ERR) {  // accepted, and completed flushed
      flush(q, *q.scq, wr->wr_id, IBV_WC_SEND);
      continue;
    }
    wire_send(q, buf, len, wr->wr_id, signaled);
  }
  *bad = nullptr;
  return 0;
}

int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  std::lock_guard lock(g_mu);
  SimQp& q = *reinterpret_cast<SimQp*>(qp);
  // What arrived before this receive was posted cannot land in it.
  if (q.qp.state == IBV_QPS_RTR || q.qp.state == IBV_QPS_RTS) drain(q);
  for (; wr; wr = wr->next) {
    *bad = wr;
    if (q.qp.state == IBV_QPS_RESET) return EINVAL;
    if (wr->num_sge != 1 || !sge_registered(wr->sg_list[0])) return EINVAL;
    if (q.qp.state == IBV_QPS_ERR) {  // accepted, and completed flushed
      flush(q, *q.rcq, wr->wr_id, IBV_WC_RECV);
      continue;
    }
    if (q.rq.size() >= q.max_recv) return ENOMEM;  // Apple's stack: about 63
    q.rq.push_back({wr->wr_id, wr->sg_list[0], realtime_ns()});
  }
  *bad = nullptr;
  return 0;
}

SimQp* qp_by_num(uint32_t num) {
  for (SimQp* q : g_qps)
    if (q->qp.qp_num == num) return q;
  return nullptr;
}

int poll_cq(ibv_cq* cq, int n, ibv_wc* wc) {
  std::lock_guard lock(g_mu);
  SimCq& c = *reinterpret_cast<SimCq*>(cq);
  const double now = now_seconds();
  for (SimQp* q : g_qps) {
    release_due(*q, now);
    if (q->rcq == &c && (q->qp.state == IBV_QPS_RTR || q->qp.state == IBV_QPS_RTS)) drain(*q);
  }
  int k = 0;
  while (k < n && !c.done.empty()) {
    wc[k] = c.done.front();
    c.done.pop_front();
    if (wc[k].opcode == IBV_WC_SEND)  // its place in the send queue frees, with unsignaled ones before it
      if (SimQp* q = qp_by_num(wc[k].qp_num)) {
        const uint32_t freed = std::min(q->sq_outstanding, 1 + q->sq_unsignaled);
        q->sq_outstanding -= freed;
        q->sq_unsignaled = 0;
      }
    ++k;
  }
  return k;
}

}  // namespace

extern "C" {

ibv_device** sim_get_device_list(int* n) SIM_EXPORT("ibv_get_device_list");
ibv_device** sim_get_device_list(int* n) {
  std::lock_guard lock(g_mu);
  std::vector<SimDevice*> devices;
  try {
    devices = host_devices();
  } catch (const std::exception& e) {  // a bad TB5_SIM_* setting: say so, list no device
    std::fprintf(stderr, "%s\n", e.what());
  }
  auto** list = static_cast<ibv_device**>(std::calloc(devices.size() + 1, sizeof(ibv_device*)));
  for (size_t i = 0; i < devices.size(); ++i) list[i] = &devices[i]->dev;
  if (n) *n = int(devices.size());
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

int sim_query_device(ibv_context* c, ibv_device_attr* a) SIM_EXPORT("ibv_query_device");
int sim_query_device(ibv_context* c, ibv_device_attr* a) {
  const Limits& l = device_of(c).limits;
  *a = ibv_device_attr{};
  std::snprintf(a->fw_ver, sizeof a->fw_ver, "tb5-sim");
  a->max_qp = int(l.max_qp);
  a->max_mr = int(l.max_mr);
  a->max_qp_wr = int(std::max(l.max_wr, l.max_recv));
  a->max_sge = 1;
  a->max_cq = 64;
  a->max_cqe = 65536;
  a->max_mr_size = uint64_t(1) << 32;
  a->phys_port_cnt = 1;
  return 0;
}

int sim_query_port(ibv_context* c, uint8_t port, ibv_port_attr* a) SIM_EXPORT("ibv_query_port");
int sim_query_port(ibv_context* c, uint8_t port, ibv_port_attr* a) {
  if (port != 1) return EINVAL;
  const Limits& l = device_of(c).limits;
  a->state = IBV_PORT_ACTIVE;
  a->max_mtu = l.path_mtu;
  a->active_mtu = l.path_mtu;
  a->gid_tbl_len = l.gid_tbl_len;
  a->max_msg_sz = l.max_msg;
  a->lid = 0;
  a->link_layer = IBV_LINK_LAYER_ETHERNET;
  return 0;
}

int sim_query_gid(ibv_context* c, uint8_t port, int index, ibv_gid* gid) SIM_EXPORT("ibv_query_gid");
int sim_query_gid(ibv_context* c, uint8_t port, int index, ibv_gid* gid) {
  return port == 1 && gid_entry(device_of(c), index, gid) ? 0 : EINVAL;
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
  SimDevice& d = device_of(pd->context);
  if (d.mrs >= d.limits.max_mr) {  // the device's memory regions are used up
    errno = ENOMEM;
    return nullptr;
  }
  ++d.mrs;
  auto* mr = new ibv_mr{};
  mr->context = pd->context;
  mr->pd = pd;
  mr->addr = addr;
  mr->length = len;
  mr->lkey = mr->rkey = g_next_key++;
  g_mrs[mr->lkey] = {reinterpret_cast<uintptr_t>(addr), len, &d};
  return mr;
}

int sim_dereg_mr(ibv_mr* mr) SIM_EXPORT("ibv_dereg_mr");
int sim_dereg_mr(ibv_mr* mr) {
  std::lock_guard lock(g_mu);
  --device_of(mr->context).mrs;
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
  SimDevice& d = device_of(pd->context);
  if (a->qp_type != IBV_QPT_UC) {  // Apple's stack: unreliable connected only
    errno = EOPNOTSUPP;
    return nullptr;
  }
  if (a->cap.max_send_wr > d.limits.max_wr || a->cap.max_recv_wr > d.limits.max_recv || a->srq) {
    errno = EINVAL;
    return nullptr;
  }
  if (d.qps >= d.limits.max_qp) {  // the device's queue pairs are used up
    errno = ENOMEM;
    return nullptr;
  }
  auto* q = new SimQp{};
  uint16_t port = 0;
  q->fd = open_qp_socket(d.ip, &port);
  if (q->fd < 0) {
    delete q;
    errno = ENOMEM;
    return nullptr;
  }
  ++d.qps;
  q->device = &d;
  q->qp.context = pd->context;
  q->qp.pd = pd;
  q->qp.send_cq = a->send_cq;
  q->qp.recv_cq = a->recv_cq;
  q->qp.qp_num = port;  // the QPN names the socket
  q->qp.qp_type = IBV_QPT_UC;
  q->qp.state = IBV_QPS_RESET;
  q->max_send = a->cap.max_send_wr;
  q->max_recv = a->cap.max_recv_wr;
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
  --q->device->qps;
  ::close(q->fd);
  delete q;
  return 0;
}

int sim_modify_qp(ibv_qp* qp, ibv_qp_attr* a, int mask) SIM_EXPORT("ibv_modify_qp");
int sim_modify_qp(ibv_qp* qp, ibv_qp_attr* a, int mask) {
  std::lock_guard lock(g_mu);
  auto* q = reinterpret_cast<SimQp*>(qp);
  const SimDevice& d = *q->device;
  if (!(mask & IBV_QP_STATE)) return EINVAL;
  switch (a->qp_state) {
    case IBV_QPS_INIT:
      if (q->qp.state != IBV_QPS_RESET && q->qp.state != IBV_QPS_INIT) return EINVAL;
      if (!(mask & IBV_QP_PORT) || a->port_num != 1) return EINVAL;
      if ((mask & IBV_QP_ACCESS_FLAGS) && (a->qp_access_flags & (IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)))
        return EOPNOTSUPP;
      break;
    case IBV_QPS_RTR: {
      if (q->qp.state != IBV_QPS_INIT) return EINVAL;
      const int need = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
      if ((mask & need) != need || !a->ah_attr.is_global) return EINVAL;
      if (a->path_mtu > d.limits.path_mtu) return EINVAL;
      if (!ipv4_mapped(a->ah_attr.grh.dgid.raw)) return EINVAL;  // the simulator routes IPv4-derived GIDs only
      ibv_gid src{};
      if (!gid_entry(d, a->ah_attr.grh.sgid_index, &src)) return EINVAL;
      if (!ipv4_mapped(src.raw)) return ETIMEDOUT;  // a link-local source routes elsewhere (Apple: errno 60)
      q->dest.sin_family = AF_INET;
      std::memcpy(&q->dest.sin_addr, a->ah_attr.grh.dgid.raw + 12, 4);
      q->dest.sin_port = htons(uint16_t(a->dest_qp_num));
      break;
    }
    case IBV_QPS_RTS:
      if (q->qp.state != IBV_QPS_RTR || !(mask & IBV_QP_SQ_PSN)) return EINVAL;
      break;
    case IBV_QPS_RESET:  // work requests dropped without completions; stale datagrams with them
      q->rq.clear();
      q->wire.clear();
      q->sq_outstanding = q->sq_unsignaled = 0;
      q->qp.state = IBV_QPS_RESET;
      drain(*q);
      break;
    case IBV_QPS_ERR: to_error(*q); break;
    default: return EINVAL;
  }
  q->qp.state = a->qp_state;
  return 0;
}

// Not verbs: the address and prefix of a device's port (a simulated device
// on one host has no kernel interface to read them from; verbs_api.hpp).
__attribute__((visibility("default"))) int tb5_verbs_device_ipv4(ibv_context* c, uint32_t* addr, uint8_t* prefix) {
  const SimDevice& d = device_of(c);
  *addr = d.ip.s_addr;
  *prefix = d.prefix;
  return 0;
}

// For tests: what the simulator did in this process (verbs_sim.hpp names them).
__attribute__((visibility("default"))) uint64_t tb5_sim_counter(const char* name) {
  std::lock_guard lock(g_mu);
  const Counters& c = counters();
  const std::map<std::string, uint64_t> all = {
      {"sends", c.sends},         {"lost", c.lost},           {"duplicated", c.duplicated},
      {"reordered", c.reordered}, {"stalls", c.stalls},       {"no_receive_posted", c.no_receive_posted},
      {"misrouted", c.misrouted}, {"send_errors", c.send_errors}, {"flushed", c.flushed},
      {"sq_full", c.sq_full}};
  auto it = all.find(name);
  return it == all.end() ? UINT64_MAX : it->second;
}

__attribute__((visibility("default"))) void tb5_sim_counters(uint64_t out[6]) {
  const char* names[6] = {"sends", "lost", "duplicated", "reordered", "stalls", "no_receive_posted"};
  for (int i = 0; i < 6; ++i) out[i] = tb5_sim_counter(names[i]);
}

}  // extern "C"
