#include "transport/tb5/verbs/verbs_device.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "transport/tb5/udp/udp_link.hpp"

namespace trillion::tb5 {
namespace {

size_t mtu_bytes(ibv_mtu m) { return size_t(128) << int(m); }  // IBV_MTU_256 = 1 ... IBV_MTU_4096 = 5

bool ipv4_mapped(const ibv_gid& g) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(g.raw, prefix, 12) == 0;
}

bool all_zero(const ibv_gid& g) {
  for (uint8_t b : g.raw)
    if (b) return false;
  return true;
}

// wr_id: slot (16 bits), rank (16), the queue pair's epoch (16).
uint64_t wr_id(uint32_t rank, uint32_t slot, uint16_t epoch) {
  return uint64_t(slot) | uint64_t(rank) << 16 | uint64_t(epoch) << 32;
}

}  // namespace

void VerbsDevice::fail(const std::string& what, int err) const {
  throw std::runtime_error("tb5 verbs (" + info_.name + "): " + what + (err ? std::string(": ") + std::strerror(err) : ""));
}

VerbsDevice::VerbsDevice(const VerbsApi& api, ibv_device* dev, const std::string& gid_index, size_t frame,
                         uint32_t self, uint32_t nranks)
    : api_(api), self_(self), nranks_(nranks), qps_(nranks) {
  if (nranks > 0xffff) throw std::runtime_error("tb5 verbs: more than 65535 ranks");
  info_.name = api_.get_device_name(dev);
  try {
    open(dev, gid_index, frame);
  } catch (...) {
    release();
    throw;
  }
}

void VerbsDevice::open(ibv_device* dev, const std::string& gid_index, size_t frame) {
  const uint32_t nranks = nranks_;
  ctx_ = api_.open_device(dev);
  if (!ctx_) fail("ibv_open_device", errno);
  ibv_port_attr port{};
  if (int e = api_.query_port(ctx_, 1, &port)) fail("ibv_query_port", e);
  if (port.state != IBV_PORT_ACTIVE) fail("port 1 is not active (no cable, or RDMA not enabled)");
  info_.path_mtu = port.active_mtu;
  info_.lid = port.lid;
  // The largest SEND: what was asked (4 KiB by default, as MLX's JACCL sends
  // on macOS 26.2) within the message size the port reports; never below
  // the path MTU's packet.
  info_.frame = frame;
  if (port.max_msg_sz) info_.frame = std::min<size_t>(info_.frame, port.max_msg_sz);
  info_.frame = std::max(info_.frame, std::min(frame, mtu_bytes(port.active_mtu)));
  ibv_device_attr da{};
  if (api_.query_device && api_.query_device(ctx_, &da) == 0) {
    info_.max_qp = uint32_t(da.max_qp), info_.max_mr = uint32_t(da.max_mr);
    // One queue pair per rank of the job, before anyone knows which cable
    // leads where (verbs_link.hpp): a job larger than the device's limit
    // cannot run on it.
    if (info_.max_qp && nranks - 1 > info_.max_qp)
      fail("the device allows " + std::to_string(info_.max_qp) + " queue pairs and tb5 needs one per other rank (" +
           std::to_string(nranks - 1) + "): run fewer ranks per host");
  }
  choose_gid(gid_index);
  find_ipv4();
  pd_ = api_.alloc_pd(ctx_);
  if (!pd_) fail("ibv_alloc_pd", errno);
  const int cqe = int(verbs_recv_depth * std::max<uint32_t>(nranks - 1, 1));
  send_cq_ = api_.create_cq(ctx_, cqe, nullptr, nullptr, 0);
  recv_cq_ = api_.create_cq(ctx_, cqe, nullptr, nullptr, 0);
  if (!send_cq_ || !recv_cq_) fail("ibv_create_cq", errno);
  // Every slot of every queue pair, page-aligned, registered once.
  region_bytes_ = size_t(nranks) * (verbs_recv_depth + verbs_send_depth) * info_.frame;
  region_bytes_ = (region_bytes_ + 4095) / 4096 * 4096;
  region_ = static_cast<uint8_t*>(std::aligned_alloc(4096, region_bytes_));
  if (!region_) fail("out of memory for buffers");
  mr_ = api_.reg_mr(pd_, region_, region_bytes_, IBV_ACCESS_LOCAL_WRITE);
  if (!mr_) fail("ibv_reg_mr", errno);
  for (uint32_t r = 0; r < nranks_; ++r) {
    if (r == self_) continue;
    ibv_qp_init_attr qa{};
    qa.send_cq = send_cq_;
    qa.recv_cq = recv_cq_;
    qa.qp_type = IBV_QPT_UC;
    qa.cap.max_send_wr = verbs_send_depth;
    qa.cap.max_recv_wr = verbs_recv_depth;
    qa.cap.max_send_sge = 1;
    qa.cap.max_recv_sge = 1;
    qps_[r].qp = api_.create_qp(pd_, &qa);
    if (!qps_[r].qp) fail("ibv_create_qp (UC, queue pair " + std::to_string(r) + " of this device)", errno);
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_INIT;
    at.pkey_index = 0;
    at.port_num = 1;
    at.qp_access_flags = 0;  // SEND/RECV only
    if (int e = api_.modify_qp(qps_[r].qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
      fail("ibv_modify_qp INIT", e);
  }
}

VerbsDevice::~VerbsDevice() { release(); }

void VerbsDevice::release() {
  for (Qp& q : qps_)
    if (q.qp) api_.destroy_qp(q.qp), q.qp = nullptr;
  if (mr_) api_.dereg_mr(mr_), mr_ = nullptr;
  if (send_cq_) api_.destroy_cq(send_cq_), send_cq_ = nullptr;
  if (recv_cq_) api_.destroy_cq(recv_cq_), recv_cq_ = nullptr;
  if (pd_) api_.dealloc_pd(pd_), pd_ = nullptr;
  if (ctx_) api_.close_device(ctx_), ctx_ = nullptr;
  std::free(region_);
  region_ = nullptr;
}

void VerbsDevice::choose_gid(const std::string& override_index) {
  // Apple's table: a link-local fe80:: entry at 0 (routes elsewhere: RTR
  // with it times out), the interface's IPv4 address mapped (::ffff:a.b.c.d)
  // at 1 once the interface has one; other stacks order theirs otherwise. So
  // the IPv4-mapped entry, wherever it is; btl_tb5_verbs_gid_index forces one.
  ibv_port_attr port{};
  api_.query_port(ctx_, 1, &port);
  // Some report a long table with only a short useful prefix: scan 16 at most.
  const int len = std::clamp(port.gid_tbl_len, 1, 16);
  if (!override_index.empty()) {
    char* end = nullptr;
    const long i = std::strtol(override_index.c_str(), &end, 10);
    if (end == override_index.c_str() || *end || i < 0 || i > 255)
      fail("btl_tb5_verbs_gid_index '" + override_index + "' is not an index");
    info_.gid_index = int(i);
    if (int e = api_.query_gid(ctx_, 1, info_.gid_index, &info_.gid)) fail("ibv_query_gid at btl_tb5_verbs_gid_index " + override_index, e);
    return;
  }
  for (int i = 0; i < len; ++i) {
    ibv_gid g{};
    if (api_.query_gid(ctx_, 1, i, &g) == 0 && !all_zero(g) && ipv4_mapped(g)) {
      info_.gid = g, info_.gid_index = i;
      return;
    }
  }
  fail("no IPv4-mapped GID in its table: give its interface an IPv4 address (or set btl_tb5_verbs_gid_index)");
}

void VerbsDevice::find_ipv4() {
  info_.net.name = info_.name;
  uint32_t addr = 0;
  uint8_t prefix = 32;
  if (api_.device_ipv4 && api_.device_ipv4(ctx_, &addr, &prefix) == 0) {
    info_.net.addr = addr, info_.net.prefix = prefix;
    return;
  }
  // The address: the IPv4-mapped GID's (the forced entry may be another).
  ibv_gid g = info_.gid;
  for (int i = 0; !ipv4_mapped(g) && i < 16; ++i)
    if (api_.query_gid(ctx_, 1, i, &g) != 0) break;
  if (!ipv4_mapped(g)) fail("no IPv4-mapped GID: its subnet cannot be told");
  std::memcpy(&addr, g.raw + 12, 4);
  info_.net.addr = addr;
  // The prefix: the interface holding that address (en3 for rdma_en3).
  try {
    for (const auto& n : ipv4_interfaces(ipv4_string(addr)))
      if (n.addr == addr) info_.net.prefix = n.prefix;
  } catch (const std::runtime_error&) {  // no interface holds it: /32, only that address matches
  }
}

uint32_t VerbsDevice::qpn(uint32_t rank) const { return qps_[rank].qp ? qps_[rank].qp->qp_num : 0; }

void VerbsDevice::post_receive(uint32_t peer, uint32_t i) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(slot(peer, i)), uint32_t(info_.frame), mr_->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = wr_id(peer, i, qps_[peer].epoch);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (int e = api_.post_recv(qps_[peer].qp, &wr, &bad)) {
    if (!qps_[peer].broken) qps_[peer].broken = any_broken_ = true;  // repaired at the next poll
    (void)e;
  }
}

void VerbsDevice::bring_up(uint32_t peer) {
  Qp& q = qps_[peer];
  ibv_qp_attr at{};
  if (q.connected) {  // a repair: back to RESET first, which drops its work requests
    at.qp_state = IBV_QPS_RESET;
    if (int e = api_.modify_qp(q.qp, &at, IBV_QP_STATE)) fail("ibv_modify_qp RESET", e);
    at = {};
    at.qp_state = IBV_QPS_INIT;
    at.port_num = 1;
    if (int e = api_.modify_qp(q.qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
      fail("ibv_modify_qp INIT", e);
  }
  at = {};
  at.qp_state = IBV_QPS_RTR;
  at.path_mtu = info_.path_mtu;
  at.dest_qp_num = q.dqpn;
  at.rq_psn = 0;
  at.ah_attr.is_global = 1;
  at.ah_attr.grh.dgid = q.dgid;
  at.ah_attr.grh.sgid_index = uint8_t(info_.gid_index);
  at.ah_attr.grh.hop_limit = 1;
  at.ah_attr.dlid = q.dlid;
  at.ah_attr.port_num = 1;
  if (int e = api_.modify_qp(q.qp, &at, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN))
  {
    uint32_t to = 0;
    std::memcpy(&to, q.dgid.raw + 12, 4);
    fail("ibv_modify_qp RTR (to " + ipv4_string(to) + ")", e);
  }
  at = {};
  at.qp_state = IBV_QPS_RTS;
  at.sq_psn = 0;
  if (int e = api_.modify_qp(q.qp, &at, IBV_QP_STATE | IBV_QP_SQ_PSN)) fail("ibv_modify_qp RTS", e);
  ++q.epoch;
  q.connected = true;
  q.broken = false;
  q.free_send.clear();
  for (uint32_t i = 0; i < verbs_send_depth; ++i) q.free_send.push_back(uint16_t(verbs_recv_depth + i));
  for (uint32_t i = 0; i < verbs_recv_depth; ++i) post_receive(peer, i);
}

void VerbsDevice::connect(uint32_t peer, const ibv_gid& gid, uint16_t lid, uint32_t qpn) {
  if (peer >= nranks_ || peer == self_ || !qps_[peer].qp) fail("peer rank outside the job");
  std::lock_guard lock(mu_);
  Qp& q = qps_[peer];
  q.dgid = gid, q.dlid = lid, q.dqpn = qpn;
  bring_up(peer);
}

void VerbsDevice::reap_sends() {
  ibv_wc wc[16];
  int n;
  while ((n = api_.poll_cq(send_cq_, 16, wc)) > 0)
    for (int i = 0; i < n; ++i) {
      const uint32_t rank = uint32_t(wc[i].wr_id >> 16 & 0xffff);
      if (rank >= nranks_) continue;
      Qp& q = qps_[rank];
      if (uint16_t(wc[i].wr_id >> 32) != q.epoch) continue;  // from before a reset: its slots were reclaimed
      q.free_send.push_back(uint16_t(wc[i].wr_id & 0xffff));
      // An error completion: the queue pair is in the error state (UC); the
      // frame is lost, the queue pair is reset at the next poll.
      if (wc[i].status != IBV_WC_SUCCESS && !q.broken) q.broken = any_broken_ = true;
    }
}

bool VerbsDevice::send(uint32_t peer, std::span<const uint8_t> head, std::span<const uint8_t> body,
                       std::span<const uint8_t> body2) {
  const size_t len = head.size() + body.size() + body2.size();
  std::lock_guard lock(mu_);
  Qp& q = qps_[peer];
  if (len > info_.frame || !q.connected || q.broken) return false;
  if (q.free_send.empty()) reap_sends();
  if (q.free_send.empty()) return false;  // send queue full: the frame is lost, and retransmitted
  const uint16_t s = q.free_send.back();
  q.free_send.pop_back();
  // The one copy a SEND needs: into registered memory.
  uint8_t* buf = slot(peer, s);
  std::memcpy(buf, head.data(), head.size());
  if (!body.empty()) std::memcpy(buf + head.size(), body.data(), body.size());
  if (!body2.empty()) std::memcpy(buf + head.size() + body.size(), body2.data(), body2.size());
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf), uint32_t(len), mr_->lkey};
  ibv_send_wr wr{};
  wr.wr_id = wr_id(peer, s, q.epoch);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  if (api_.post_send(q.qp, &wr, &bad) != 0) {
    q.free_send.push_back(s);  // refused (queue full): lost
    return false;
  }
  return true;
}

void VerbsDevice::repair() {
  if (!any_broken_) return;
  any_broken_ = false;
  for (uint32_t r = 0; r < nranks_; ++r)
    if (qps_[r].broken && qps_[r].connected) {
      bring_up(r);
      ++resets_;
    }
}

size_t VerbsDevice::poll(const std::function<void(std::span<const uint8_t>)>& on_frame, size_t max) {
  size_t got = 0;
  ibv_wc wc[16];
  while (got < max) {
    const int n = api_.poll_cq(recv_cq_, int(std::min<size_t>(16, max - got)), wc);
    if (n < 0) fail("ibv_poll_cq", EIO);
    if (n == 0) break;
    // Frames are handed over without the lock (on_frame may send), then
    // their buffers go back to the receive queue together.
    for (int i = 0; i < n; ++i) {
      const uint32_t rank = uint32_t(wc[i].wr_id >> 16 & 0xffff);
      if (rank < nranks_ && wc[i].status == IBV_WC_SUCCESS && uint16_t(wc[i].wr_id >> 32) == qps_[rank].epoch)
        on_frame({slot(rank, uint32_t(wc[i].wr_id & 0xffff)), wc[i].byte_len});
    }
    std::lock_guard lock(mu_);
    for (int i = 0; i < n; ++i) {
      const uint32_t rank = uint32_t(wc[i].wr_id >> 16 & 0xffff);
      if (rank >= nranks_ || uint16_t(wc[i].wr_id >> 32) != qps_[rank].epoch) continue;  // before a reset
      if (wc[i].status == IBV_WC_SUCCESS) {
        post_receive(rank, uint32_t(wc[i].wr_id & 0xffff));
      } else if (!qps_[rank].broken) {  // flushed or failed: the queue pair is in error, reset below
        qps_[rank].broken = any_broken_ = true;
      }
    }
    got += size_t(n);
  }
  std::lock_guard lock(mu_);
  reap_sends();
  repair();
  return got;
}

}  // namespace trillion::tb5
