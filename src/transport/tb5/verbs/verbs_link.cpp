#include "transport/tb5/verbs/verbs_link.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "transport/tb5/verbs/verbs_api.hpp"

namespace trillion::tb5 {
namespace {

size_t mtu_bytes(ibv_mtu m) { return size_t(128) << int(m); }  // IBV_MTU_256 = 1 ... IBV_MTU_4096 = 5

bool ipv4_mapped(const ibv_gid& g) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(g.raw, prefix, 12) == 0;
}

class VerbsLink final : public Link {
 public:
  VerbsLink(VerbsApi api, const std::string& device, size_t mtu, uint32_t self, uint32_t nranks);
  ~VerbsLink() override;
  size_t mtu() const override { return mtu_; }
  std::vector<uint8_t> address() const override;
  void connect(uint32_t peer, std::span<const uint8_t> address) override;
  void send(uint32_t peer, std::span<const uint8_t> frame) override;
  size_t poll(const std::function<void(std::span<const uint8_t>)>& on_frame, size_t max) override;
  std::string describe() const override;

 private:
  [[noreturn]] void fail(const std::string& what, int err = 0) const {
    throw std::runtime_error("tb5 verbs (" + name_ + "): " + what + (err ? std::string(": ") + std::strerror(err) : ""));
  }
  uint8_t* recv_slot(uint32_t peer, uint32_t i) { return region_.data() + (size_t(peer) * verbs_recv_depth + i) * mtu_; }
  uint8_t* send_slot(uint32_t i) { return region_.data() + recv_bytes_ + size_t(i) * mtu_; }
  void post_receive(uint32_t peer, uint32_t i);
  void reap_sends();  // with send_mu_ held

  VerbsApi api_;
  std::string name_;
  uint32_t self_, nranks_;
  size_t mtu_ = 0, recv_bytes_ = 0;
  ibv_mtu path_mtu_ = IBV_MTU_1024;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq *send_cq_ = nullptr, *recv_cq_ = nullptr;
  std::vector<ibv_qp*> qps_;
  ibv_gid gid_{};
  int gid_index_ = 0;
  uint16_t lid_ = 0;
  std::vector<uint8_t> region_;
  ibv_mr* mr_ = nullptr;
  std::mutex send_mu_;  // the heartbeat thread sends too
  std::vector<uint32_t> free_send_;
};

VerbsLink::VerbsLink(VerbsApi api, const std::string& device, size_t mtu, uint32_t self, uint32_t nranks)
    : api_(std::move(api)), self_(self), nranks_(nranks), qps_(nranks, nullptr) {
  int n = 0;
  ibv_device** list = api_.get_device_list(&n);
  if (!list || n == 0) {
    if (list) api_.free_device_list(list);
    throw std::runtime_error("no RDMA device (" + api_.library + " lists none; on macOS: rdma_ctl enable)");
  }
  ibv_device* dev = nullptr;
  for (int i = 0; i < n && !dev; ++i)
    if (device.empty() || device == api_.get_device_name(list[i])) dev = list[i];
  if (!dev) {
    api_.free_device_list(list);
    throw std::runtime_error("no RDMA device named '" + device + "' (btl_tb5_verbs_device)");
  }
  name_ = api_.get_device_name(dev);
  ctx_ = api_.open_device(dev);
  api_.free_device_list(list);
  if (!ctx_) fail("ibv_open_device", errno);
  ibv_port_attr port{};
  if (int e = api_.query_port(ctx_, 1, &port)) fail("ibv_query_port", e);
  if (port.state != IBV_PORT_ACTIVE) fail("port 1 is not active (cable, or rdma_ctl enable)");
  path_mtu_ = port.active_mtu;
  mtu_ = std::min(mtu, mtu_bytes(port.active_mtu));
  lid_ = port.lid;
  // The GID derived from the interface's IPv4 address (::ffff:a.b.c.d), as
  // JACCL does; TB5_VERBS_GID_INDEX overrides.
  if (const char* gi = std::getenv("TB5_VERBS_GID_INDEX")) {
    gid_index_ = std::atoi(gi);
    if (api_.query_gid(ctx_, 1, gid_index_, &gid_)) fail("ibv_query_gid at TB5_VERBS_GID_INDEX", errno);
  } else {
    bool found = false;
    for (int i = 0; i < 16 && !found; ++i)
      if (api_.query_gid(ctx_, 1, i, &gid_) == 0 && ipv4_mapped(gid_)) gid_index_ = i, found = true;
    if (!found) fail("no IPv4-derived GID on port 1 (set TB5_VERBS_GID_INDEX)");
  }
  pd_ = api_.alloc_pd(ctx_);
  if (!pd_) fail("ibv_alloc_pd", errno);
  const int peers = int(nranks_ - 1);
  send_cq_ = api_.create_cq(ctx_, int(verbs_send_depth) * std::max(peers, 1), nullptr, nullptr, 0);
  recv_cq_ = api_.create_cq(ctx_, int(verbs_recv_depth) * std::max(peers, 1), nullptr, nullptr, 0);
  if (!send_cq_ || !recv_cq_) fail("ibv_create_cq", errno);
  // One region for every receive slot and send slot, registered once.
  recv_bytes_ = size_t(nranks_) * verbs_recv_depth * mtu_;
  const uint32_t nsend = verbs_send_depth * uint32_t(std::max(peers, 1));
  region_.assign(recv_bytes_ + size_t(nsend) * mtu_, 0);
  mr_ = api_.reg_mr(pd_, region_.data(), region_.size(), IBV_ACCESS_LOCAL_WRITE);
  if (!mr_) fail("ibv_reg_mr", errno);
  for (uint32_t i = 0; i < nsend; ++i) free_send_.push_back(nsend - 1 - i);
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
    qps_[r] = api_.create_qp(pd_, &qa);
    if (!qps_[r]) fail("ibv_create_qp (UC)", errno);
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_INIT;
    at.pkey_index = 0;
    at.port_num = 1;
    at.qp_access_flags = 0;  // SEND/RECV only
    if (int e = api_.modify_qp(qps_[r], &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
      fail("ibv_modify_qp INIT", e);
    for (uint32_t i = 0; i < verbs_recv_depth; ++i) post_receive(r, i);
  }
}

VerbsLink::~VerbsLink() {
  for (ibv_qp* q : qps_)
    if (q) api_.destroy_qp(q);
  if (mr_) api_.dereg_mr(mr_);
  if (send_cq_) api_.destroy_cq(send_cq_);
  if (recv_cq_) api_.destroy_cq(recv_cq_);
  if (pd_) api_.dealloc_pd(pd_);
  if (ctx_) api_.close_device(ctx_);
}

void VerbsLink::post_receive(uint32_t peer, uint32_t i) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(recv_slot(peer, i)), uint32_t(mtu_), mr_->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = uint64_t(peer) * verbs_recv_depth + i;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (int e = api_.post_recv(qps_[peer], &wr, &bad)) fail("ibv_post_recv", e);
}

std::vector<uint8_t> VerbsLink::address() const {
  // gid(16) lid(2) then, per rank, the queue pair this process made for it.
  std::vector<uint8_t> a(18 + 4 * size_t(nranks_), 0);
  std::memcpy(a.data(), gid_.raw, 16);
  std::memcpy(a.data() + 16, &lid_, 2);
  for (uint32_t r = 0; r < nranks_; ++r) {
    const uint32_t qpn = qps_[r] ? qps_[r]->qp_num : 0;
    std::memcpy(a.data() + 18 + 4 * r, &qpn, 4);
  }
  return a;
}

void VerbsLink::connect(uint32_t peer, std::span<const uint8_t> addr) {
  if (peer >= nranks_ || peer == self_) fail("peer rank outside the job");
  if (addr.size() != 18 + 4 * size_t(nranks_)) fail("peer address of the wrong size (another backend?)");
  uint32_t qpn = 0;
  std::memcpy(&qpn, addr.data() + 18 + 4 * size_t(self_), 4);
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_RTR;
  at.path_mtu = path_mtu_;
  at.dest_qp_num = qpn;
  at.rq_psn = 0;
  at.ah_attr.is_global = 1;
  std::memcpy(at.ah_attr.grh.dgid.raw, addr.data(), 16);
  at.ah_attr.grh.sgid_index = uint8_t(gid_index_);
  at.ah_attr.grh.hop_limit = 1;
  std::memcpy(&at.ah_attr.dlid, addr.data() + 16, 2);
  at.ah_attr.port_num = 1;
  if (int e = api_.modify_qp(qps_[peer], &at,
                             IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN))
    fail("ibv_modify_qp RTR", e);
  ibv_qp_attr rts{};
  rts.qp_state = IBV_QPS_RTS;
  rts.sq_psn = 0;
  if (int e = api_.modify_qp(qps_[peer], &rts, IBV_QP_STATE | IBV_QP_SQ_PSN)) fail("ibv_modify_qp RTS", e);
}

void VerbsLink::reap_sends() {
  ibv_wc wc[16];
  int n;
  while ((n = api_.poll_cq(send_cq_, 16, wc)) > 0)
    for (int i = 0; i < n; ++i) free_send_.push_back(uint32_t(wc[i].wr_id));
}

void VerbsLink::send(uint32_t peer, std::span<const uint8_t> frame) {
  if (frame.size() > mtu_ || !qps_[peer]) return;
  std::lock_guard lock(send_mu_);
  if (free_send_.empty()) reap_sends();
  if (free_send_.empty()) return;  // send queue full: the frame is lost, and retransmitted
  const uint32_t slot = free_send_.back();
  free_send_.pop_back();
  std::memcpy(send_slot(slot), frame.data(), frame.size());
  ibv_sge sge{reinterpret_cast<uintptr_t>(send_slot(slot)), uint32_t(frame.size()), mr_->lkey};
  ibv_send_wr wr{};
  wr.wr_id = slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  if (api_.post_send(qps_[peer], &wr, &bad) != 0) free_send_.push_back(slot);  // queue full: lost
}

size_t VerbsLink::poll(const std::function<void(std::span<const uint8_t>)>& on_frame, size_t max) {
  size_t got = 0;
  ibv_wc wc[16];
  while (got < max) {
    const int n = api_.poll_cq(recv_cq_, int(std::min<size_t>(16, max - got)), wc);
    if (n < 0) fail("ibv_poll_cq", EIO);
    if (n == 0) break;
    for (int i = 0; i < n; ++i) {
      const uint32_t peer = uint32_t(wc[i].wr_id / verbs_recv_depth), slot = uint32_t(wc[i].wr_id % verbs_recv_depth);
      // A failed receive (flushed, too long) is a lost frame; its buffer goes back either way.
      if (wc[i].status == IBV_WC_SUCCESS) on_frame({recv_slot(peer, slot), wc[i].byte_len});
      post_receive(peer, slot);
      ++got;
    }
  }
  std::lock_guard lock(send_mu_);
  reap_sends();
  return got;
}

std::string VerbsLink::describe() const {
  return "verbs " + name_ + " (UC, MTU " + std::to_string(mtu_) + ", " + api_.library + ")";
}

}  // namespace

std::unique_ptr<Link> open_verbs_link(const std::string& library, const std::string& device, size_t mtu,
                                      uint32_t self, uint32_t nranks) {
  return std::make_unique<VerbsLink>(load_verbs(library), device, mtu, self, nranks);
}

}  // namespace trillion::tb5
