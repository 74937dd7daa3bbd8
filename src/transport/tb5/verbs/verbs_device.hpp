// One RDMA device of the verbs backend: on a Mac, one Thunderbolt port
// (rdma_enN), whose cable leads to one other host. It holds a protection
// domain, a send and a receive completion queue, one registered region for
// every buffer (one memory region: devices limit them), and one UC queue
// pair per rank of the job, made when the device opens — a peer's address
// must carry the queue pair meant for it, and which device leads to which
// peer is known only once every address is in (verbs_link.hpp). Only the
// queue pairs of peers routed through this device are connected; their
// receives are posted then.
//
// A queue pair that reports an error completion (UC: the QP moves to the
// error state, its work requests are flushed) is reset and reconnected on the
// next poll; frames lost meanwhile are the engine's to resend.
#pragma once
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "transport/tb5/core/subnet.hpp"
#include "transport/tb5/verbs/verbs_api.hpp"
#include "transport/tb5/verbs/verbs_link.hpp"

namespace trillion::tb5 {

struct VerbsDeviceInfo {
  std::string name;
  ibv_gid gid{};
  int gid_index = 0;
  uint16_t lid = 0;
  Ipv4Net net;           // the port's IPv4 address and subnet (named after the device)
  size_t frame = 0;      // largest SEND this device takes
  ibv_mtu path_mtu = IBV_MTU_1024;
  uint32_t max_qp = 0, max_mr = 0;  // as reported (0: not reported)
};

class VerbsDevice {
 public:
  // Opens `dev` and makes its queue pairs; throws std::runtime_error naming
  // the device. gid_index: "" = the table's IPv4-mapped entry.
  VerbsDevice(const VerbsApi& api, ibv_device* dev, const std::string& gid_index, size_t frame, uint32_t self,
              uint32_t nranks);
  ~VerbsDevice();
  VerbsDevice(const VerbsDevice&) = delete;
  VerbsDevice& operator=(const VerbsDevice&) = delete;

  const VerbsDeviceInfo& info() const { return info_; }
  uint32_t qpn(uint32_t rank) const;  // 0: none (self)
  // Connects this device's queue pair for `peer` to the peer's (RTR, RTS)
  // and posts its receives; frames to it are at most `frame` bytes.
  void connect(uint32_t peer, const ibv_gid& gid, uint16_t lid, uint32_t qpn);
  // Best effort: false if the send queue is full or the queue pair is down.
  bool send(uint32_t peer, std::span<const uint8_t> head, std::span<const uint8_t> body, std::span<const uint8_t> body2);
  size_t poll(const std::function<void(std::span<const uint8_t>)>& on_frame, size_t max);
  uint64_t resets() const { return resets_; }

 private:
  struct Qp {
    ibv_qp* qp = nullptr;
    bool connected = false, broken = false;
    uint16_t epoch = 0;              // in every wr_id: completions of a queue pair since reset are ignored
    std::vector<uint16_t> free_send;  // send slots whose completion has been polled
    ibv_gid dgid{};
    uint16_t dlid = 0;
    uint32_t dqpn = 0;
  };
  [[noreturn]] void fail(const std::string& what, int err = 0) const;
  void open(ibv_device* dev, const std::string& gid_index, size_t frame);
  void release();  // everything opened so far (the destructor, or a constructor that throws)
  // Per rank: verbs_recv_depth receive slots, then verbs_send_depth send slots.
  uint8_t* slot(uint32_t rank, uint32_t i) {
    return region_ + (size_t(rank) * (verbs_recv_depth + verbs_send_depth) + i) * info_.frame;
  }
  void choose_gid(const std::string& override_index);
  void find_ipv4();
  void bring_up(uint32_t peer);     // RESET -> INIT -> RTR -> RTS, receives posted; with mu_ held
  void post_receive(uint32_t peer, uint32_t i);
  void reap_sends();                // with mu_ held
  void repair();                    // with mu_ held

  const VerbsApi& api_;
  VerbsDeviceInfo info_;
  uint32_t self_, nranks_;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq *send_cq_ = nullptr, *recv_cq_ = nullptr;
  std::vector<Qp> qps_;  // by rank
  uint8_t* region_ = nullptr;
  size_t region_bytes_ = 0;
  ibv_mr* mr_ = nullptr;
  std::mutex mu_;  // the heartbeat thread sends too
  bool any_broken_ = false;
  uint64_t resets_ = 0;
};

}  // namespace trillion::tb5
