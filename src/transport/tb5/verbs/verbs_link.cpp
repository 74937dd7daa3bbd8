#include "transport/tb5/verbs/verbs_link.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "transport/tb5/core/subnet.hpp"
#include "transport/tb5/verbs/verbs_api.hpp"
#include "transport/tb5/verbs/verbs_device.hpp"

namespace trillion::tb5 {
namespace {

// Address blob: the number of devices, then per device its name (length,
// bytes), GID (16), LID (2), IPv4 address (4, network order), prefix (1),
// largest frame (4) and, per rank of the job, the queue pair it made for
// that rank (4); integers little-endian.
void put(std::vector<uint8_t>& a, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) a.push_back(uint8_t(v >> (8 * i)));
}

struct Reader {
  std::span<const uint8_t> b;
  size_t at = 0;
  bool ok = true;
  uint64_t get(int n) {
    if (at + size_t(n) > b.size()) return ok = false, 0;
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | b[at + size_t(i)];
    at += size_t(n);
    return v;
  }
  const uint8_t* bytes(size_t n) {
    if (at + n > b.size()) return ok = false, nullptr;
    at += n;
    return b.data() + at - n;
  }
};

struct Remote {
  Ipv4Net net;
  ibv_gid gid{};
  uint16_t lid = 0;
  size_t frame = 0;
  uint32_t qpn = 0;  // the queue pair it made for this rank
};

class VerbsLink final : public Link {
 public:
  VerbsLink(VerbsApi api, const VerbsOptions& o, uint32_t self, uint32_t nranks);
  size_t mtu() const override { return mtu_; }
  size_t frame_size(uint32_t peer) const override { return frame_[peer] ? frame_[peer] : mtu_; }
  std::vector<uint8_t> address() const override;
  void connect(uint32_t peer, std::span<const uint8_t> address) override;
  void send(uint32_t peer, std::span<const uint8_t> frame) override { send_parts(peer, frame, {}, {}); }
  void send_parts(uint32_t peer, std::span<const uint8_t> head, std::span<const uint8_t> body,
                  std::span<const uint8_t> body2) override {
    if (peer < route_.size() && route_[peer] >= 0) devs_[size_t(route_[peer])]->send(peer, head, body, body2);
  }
  size_t poll(const std::function<void(std::span<const uint8_t>)>& on_frame, size_t max) override;
  std::string describe() const override;

 private:
  VerbsApi api_;  // first: the devices use it until they are gone
  std::vector<std::unique_ptr<VerbsDevice>> devs_;
  std::vector<std::string> skipped_;  // "rdma_en4 (port 1 is not active ...)"
  uint32_t self_, nranks_;
  size_t mtu_ = 0, next_ = 0;
  std::vector<int> route_;       // by peer: the device leading to it (-1: none yet)
  std::vector<size_t> frame_;    // by peer: the largest frame both ends take
};

VerbsLink::VerbsLink(VerbsApi api, const VerbsOptions& o, uint32_t self, uint32_t nranks)
    : api_(std::move(api)), self_(self), nranks_(nranks), route_(nranks, -1), frame_(nranks, 0) {
  std::vector<std::string> wanted;
  for (size_t at = 0; at <= o.devices.size();) {
    const size_t comma = std::min(o.devices.find(',', at), o.devices.size());
    if (comma > at) wanted.push_back(o.devices.substr(at, comma - at));
    at = comma + 1;
  }
  int n = 0;
  ibv_device** list = api_.get_device_list(&n);
  if (!list || n == 0) {
    if (list) api_.free_device_list(list);
    throw std::runtime_error("no RDMA device (" + api_.library +
                             " lists none; on macOS: enable RDMA from macOS Recovery, `rdma_ctl enable`)");
  }
  std::vector<std::string> found;
  try {
    for (int i = 0; i < n; ++i) {
      const std::string name = api_.get_device_name(list[i]);
      found.push_back(name);
      const bool named = std::find(wanted.begin(), wanted.end(), name) != wanted.end();
      if (!wanted.empty() && !named) continue;
      try {
        devs_.push_back(std::make_unique<VerbsDevice>(api_, list[i], o.gid_index, o.frame, self, nranks));
      } catch (const std::runtime_error& e) {
        if (named) throw;  // a device asked for by name must open
        skipped_.push_back(e.what());
      }
    }
  } catch (...) {
    api_.free_device_list(list);
    throw;
  }
  api_.free_device_list(list);
  for (const auto& w : wanted)
    if (std::find(found.begin(), found.end(), w) == found.end())
      throw std::runtime_error("no RDMA device named '" + w + "' (btl_tb5_verbs_device)");
  if (devs_.empty()) {
    std::string why;
    for (const auto& s : skipped_) why += "; " + s;
    throw std::runtime_error("no RDMA device with an active port (" + api_.library + why + ")");
  }
  for (const auto& d : devs_) mtu_ = std::max(mtu_, d->info().frame);
}

std::vector<uint8_t> VerbsLink::address() const {
  std::vector<uint8_t> a;
  a.push_back(uint8_t(devs_.size()));
  for (const auto& d : devs_) {
    const VerbsDeviceInfo& i = d->info();
    a.push_back(uint8_t(std::min<size_t>(i.name.size(), 255)));
    a.insert(a.end(), i.name.begin(), i.name.begin() + a.back());
    a.insert(a.end(), i.gid.raw, i.gid.raw + 16);
    put(a, i.lid, 2);
    const auto* ip = reinterpret_cast<const uint8_t*>(&i.net.addr);
    a.insert(a.end(), ip, ip + 4);
    a.push_back(i.net.prefix);
    put(a, i.frame, 4);
    for (uint32_t r = 0; r < nranks_; ++r) put(a, d->qpn(r), 4);
  }
  return a;
}

void VerbsLink::connect(uint32_t peer, std::span<const uint8_t> address) {
  if (peer >= nranks_ || peer == self_) throw std::runtime_error("tb5 verbs: peer rank outside the job");
  Reader rd{address};
  std::vector<Remote> theirs(rd.get(1));
  for (Remote& t : theirs) {
    const size_t len = rd.get(1);
    const uint8_t* name = rd.bytes(len);
    const uint8_t* gid = rd.bytes(16);
    t.lid = uint16_t(rd.get(2));
    const uint8_t* ip = rd.bytes(4);
    t.net.prefix = uint8_t(rd.get(1));
    t.frame = rd.get(4);
    const uint8_t* qpns = rd.bytes(4 * size_t(nranks_));
    if (!rd.ok) break;
    t.net.name.assign(reinterpret_cast<const char*>(name), len);
    std::memcpy(t.gid.raw, gid, 16);
    std::memcpy(&t.net.addr, ip, 4);
    Reader q{{qpns + 4 * size_t(self_), 4}};
    t.qpn = uint32_t(q.get(4));
  }
  if (!rd.ok || rd.at != address.size() || theirs.empty())
    throw std::runtime_error("tb5 verbs: rank " + std::to_string(peer) +
                             "'s address is malformed (another backend, or another job size?)");
  std::vector<Ipv4Net> ours, remote;
  for (const auto& d : devs_) ours.push_back(d->info().net);
  for (const auto& t : theirs) remote.push_back(t.net);
  Path path;
  try {
    path = choose_path(ours, remote, "rank " + std::to_string(peer));
  } catch (const NoPath& e) {
    std::string why = e.what();
    for (const auto& s : skipped_) why += "; not used here: " + s;
    throw NoPath(why);
  }
  const Remote& t = theirs[path.remote];
  if (!t.qpn) throw std::runtime_error("tb5 verbs: rank " + std::to_string(peer) + " made no queue pair for this rank");
  devs_[path.local]->connect(peer, t.gid, t.lid, t.qpn);
  route_[peer] = int(path.local);
  frame_[peer] = std::min(devs_[path.local]->info().frame, t.frame);
  if (frame_[peer] < 64) throw std::runtime_error("tb5 verbs: rank " + std::to_string(peer) + " takes frames under 64 bytes");
}

size_t VerbsLink::poll(const std::function<void(std::span<const uint8_t>)>& on_frame, size_t max) {
  // Every device each call, starting one further each time, so no device's
  // backlog starves the others.
  size_t got = 0;
  for (size_t k = 0; k < devs_.size() && got < max; ++k) got += devs_[(next_ + k) % devs_.size()]->poll(on_frame, max - got);
  next_ = (next_ + 1) % devs_.size();
  return got;
}

std::string VerbsLink::describe() const {
  std::string names;
  for (const auto& d : devs_) names += (names.empty() ? "" : ", ") + d->info().name;
  return "verbs " + names + " (UC, MTU " + std::to_string(mtu_) + ", path MTU " +
         std::to_string(size_t(128) << int(devs_[0]->info().path_mtu)) + ", " + api_.library + ")";
}

}  // namespace

std::unique_ptr<Link> open_verbs_link(const VerbsOptions& o, uint32_t self, uint32_t nranks) {
  return std::make_unique<VerbsLink>(load_verbs(o.library), o, self, nranks);
}

std::unique_ptr<Link> open_verbs_link(const std::string& library, const std::string& device, size_t mtu,
                                      uint32_t self, uint32_t nranks) {
  VerbsOptions o;
  o.library = library;
  o.devices = device;
  o.frame = mtu;
  return std::make_unique<VerbsLink>(load_verbs(library), o, self, nranks);
}

}  // namespace trillion::tb5
