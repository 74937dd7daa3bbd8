#include "transport/tb5/api/tb5_api.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <dlfcn.h>
#include <unistd.h>

#include "transport/tb5/core/engine.hpp"
#include "transport/tb5/core/faulty_link.hpp"
#include "transport/tb5/udp/udp_link.hpp"
#include "transport/tb5/verbs/verbs_link.hpp"

using namespace trillion::tb5;

namespace {

void set_err(char* err, size_t len, const std::string& msg) {
  if (err && len) std::snprintf(err, len, "%s", msg.c_str());
}

std::string str(const char* s) { return s ? s : ""; }

std::string host_name() {
  char h[256] = "";
  if (gethostname(h, sizeof h - 1) != 0 || !*h) return "unknown host";
  return h;
}

// The modex address: magic 'T' '5', a format version, the backend (1 udp,
// 2 verbs), the host name (length, bytes), then the backend's own address.
// The host name is how a rank knows a peer shares its host (Open MPI's
// notion too: a node is a host name), and names both ends in errors.
constexpr uint8_t envelope_version = 2;

// Frames a udp socket's receive buffer holds per peer: the window, so that
// every peer's window fits at once. On Linux a datagram below 16 KiB takes
// about twice its size of the buffer, a larger one its size and ~1 KiB
// (measured on loopback). Where datagrams travel as IP fragments (any link
// but loopback: MTUs are 1500 or 9000), every peer's window must also fit
// the kernel's reassembly memory, or fragments are dropped and whole frames
// with them: Linux allows 4 MiB (ipfrag_high_thresh); half of it is used.
uint32_t udp_window(size_t rcvbuf, size_t frame, uint32_t nranks, bool fragments) {
  const size_t peers = std::max<uint32_t>(1, nranks - 1);
  const size_t truesize = frame < 16384 ? 2 * frame : frame + 1024;
  size_t per_peer = rcvbuf / truesize / peers;
  if (fragments) per_peer = std::min(per_peer, (size_t(2) << 20) / (frame + 1024) / peers);
  return uint32_t(std::clamp<size_t>(per_peer, 4, 64));
}

}  // namespace

struct tb5_handle {
  std::unique_ptr<Link> link;
  FaultyLink* faulty = nullptr;  // inside link, when faults are injected
  std::string backend, description, host;
  uint32_t self = 0;
  bool local_peers = false;
  std::vector<bool> refused;  // by rank: already reported unreachable
  std::unique_ptr<Engine> engine;
  std::thread heartbeat;
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  // The simulator's counters, when the verbs library is the simulator (tests
  // assert that its faults happened; NULL on a real stack).
  uint64_t (*sim_counter)(const char*) = nullptr;
};

extern "C" tb5_handle* tb5_open(const tb5_options* o, uint32_t self, uint32_t nranks, tb5_deliver_fn deliver,
                                tb5_dead_fn dead, void* ctx, char* err, size_t errlen) {
  try {
    auto h = std::make_unique<tb5_handle>();
    const std::string backend = str(o->backend);
    if (backend != "udp" && backend != "verbs" && backend != "auto")
      throw std::runtime_error("btl_tb5_backend must be udp, verbs or auto, not '" + backend + "'");
    h->host = host_name();
    h->self = self;
    h->local_peers = o->local_peers != 0;
    h->refused.assign(nranks, false);
    uint32_t window = o->window ? o->window : 64;
    if (backend != "udp") {
      try {
        VerbsOptions vo;
        vo.library = str(o->verbs_library);
        vo.devices = str(o->verbs_device);
        vo.gid_index = str(o->verbs_gid_index);
        if (o->mtu) vo.frame = o->mtu;
        h->link = open_verbs_link(vo, self, nranks);
        h->backend = "verbs";
        // Already open (RTLD_NOLOAD): the same handle load_verbs holds.
        std::string lib_name = vo.library.empty() ? str(std::getenv("TB5_VERBS_LIBRARY")) : vo.library;
        void* lib = lib_name.empty() ? nullptr : dlopen(lib_name.c_str(), RTLD_NOW | RTLD_NOLOAD | RTLD_LOCAL);
        if (lib) h->sim_counter = reinterpret_cast<uint64_t (*)(const char*)>(dlsym(lib, "tb5_sim_counter"));
        // The window must fit the posted receives (acks take some too).
        window = std::min<uint32_t>(window, verbs_window);
      } catch (const std::exception& e) {
        if (backend == "verbs") throw;
      }
    }
    if (!h->link) {
      // Datagrams as large as IPv4 allows (one system call and one kernel
      // copy per 64 KB each way; the BTL's 65408-byte sends fit one); on a
      // 1500-byte link IP fragments them, and any lost fragment is one lost
      // frame.
      auto udp = std::make_unique<UdpLink>(ipv4_interfaces(str(o->if_include)), o->mtu ? o->mtu : 65507, nranks);
      if (!o->window) window = udp_window(udp->receive_buffer(), udp->mtu(), nranks, udp->fragments());
      h->link = std::move(udp);
      h->backend = "udp";
    }
    FaultConfig fc{o->loss, o->duplicate, o->reorder, o->seed ? o->seed + self : 1 + self};
    if (fc.any()) {
      auto f = std::make_unique<FaultyLink>(std::move(h->link), fc);
      h->faulty = f.get();
      h->link = std::move(f);
    }
    h->description = h->link->describe();
    EngineConfig ec{window, o->rto, o->rto_max, o->heartbeat, o->peer_timeout, o->initial_seq};
    ec.payload_hash = o->payload_hash == 1 ? 1 : o->payload_hash == 2 ? 0 : -1;
    tb5_handle* raw = h.get();
    h->engine = std::make_unique<Engine>(
        *h->link, self, nranks, ec,
        [deliver, ctx](uint32_t peer, uint8_t tag, std::span<const uint8_t> m) {
          deliver(ctx, peer, tag, m.data(), m.size());
        },
        [dead, ctx, raw](uint32_t peer, double silent) {
          dead(ctx, peer, silent, raw->engine->peer_report(peer).c_str());
        });
    raw->heartbeat = std::thread([raw, period = o->heartbeat] {
      std::unique_lock lock(raw->mu);
      while (!raw->cv.wait_for(lock, std::chrono::duration<double>(period), [raw] { return raw->stop; }))
        raw->engine->send_heartbeats();
    });
    return h.release();
  } catch (const std::exception& e) {
    set_err(err, errlen, e.what());
    return nullptr;
  }
}

extern "C" size_t tb5_address(tb5_handle* h, void* buf, size_t cap) {
  const auto a = h->link->address();
  const size_t host = std::min<size_t>(h->host.size(), 255), n = 5 + host + a.size();
  if (n > cap) return 0;
  auto* b = static_cast<uint8_t*>(buf);
  b[0] = 'T', b[1] = '5', b[2] = envelope_version, b[3] = h->backend == "verbs" ? 2 : 1, b[4] = uint8_t(host);
  std::memcpy(b + 5, h->host.data(), host);
  std::memcpy(b + 5 + host, a.data(), a.size());
  return n;
}

extern "C" int tb5_connect(tb5_handle* h, uint32_t peer, const void* addr, size_t len, char* err, size_t errlen) {
  const auto* b = static_cast<const uint8_t*>(addr);
  const std::string who = "rank " + std::to_string(peer);
  if (peer < h->refused.size() && h->refused[peer]) return 1;  // said once already
  if (len < 5 || b[0] != 'T' || b[1] != '5' || b[2] != envelope_version || len < 5 + size_t(b[4])) {
    set_err(err, errlen, who + "'s tb5 address is not one this build reads (a different tb5 on that host?)");
    return -1;
  }
  const std::string host(reinterpret_cast<const char*>(b + 5), b[4]), theirs = b[3] == 2 ? "verbs" : "udp";
  const std::string here = "rank " + std::to_string(h->self) + " (" + h->host + ")", there = who + " (" + host + ")";
  if (theirs != h->backend) {
    set_err(err, errlen, here + " uses tb5's " + h->backend + " backend, " + there + " its " + theirs +
                             ": give every rank the same btl_tb5_backend (a host without RDMA falls back to udp)");
    return -1;
  }
  // Ranks of one host never go through a device: a Thunderbolt cable joins
  // two hosts, and btl/self and sm are faster between ranks of one host.
  if (host == h->host && !h->local_peers) return 1;
  try {
    h->link->connect(peer, {b + 5 + b[4], len - 5 - b[4]});
    h->engine->add_peer(peer);
    return 0;
  } catch (const NoPath& e) {
    set_err(err, errlen, here + " cannot reach " + there + ": " + e.what() + "; is the cable between " + h->host +
                             " and " + host + " plugged in, with an IPv4 address in one subnet at each end?");
  } catch (const std::exception& e) {
    set_err(err, errlen, here + " cannot connect to " + there + ": " + e.what());
  }
  if (peer < h->refused.size()) h->refused[peer] = true;
  return -1;
}

extern "C" int tb5_send(tb5_handle* h, uint32_t peer, uint8_t tag, const tb5_piece* pieces, size_t n, char* err,
                        size_t errlen) {
  try {
    std::span<const uint8_t> spans[8];
    if (n > 8) throw std::invalid_argument("tb5: more than 8 pieces in one message");
    for (size_t i = 0; i < n; ++i) spans[i] = {static_cast<const uint8_t*>(pieces[i].data), pieces[i].len};
    h->engine->send(peer, tag, {spans, n});
    return 0;
  } catch (const std::exception& e) {
    set_err(err, errlen, e.what());
    return -1;
  }
}

extern "C" int tb5_send_borrowed(tb5_handle* h, uint32_t peer, uint8_t tag, const tb5_piece* pieces, size_t n,
                                 void* cookie, char* err, size_t errlen) {
  try {
    std::span<const uint8_t> spans[8];
    if (n > 8) throw std::invalid_argument("tb5: more than 8 pieces in one message");
    for (size_t i = 0; i < n; ++i) spans[i] = {static_cast<const uint8_t*>(pieces[i].data), pieces[i].len};
    return h->engine->send_borrowed(peer, tag, {spans, n}, cookie) ? 0 : 1;
  } catch (const std::exception& e) {
    set_err(err, errlen, e.what());
    return -1;
  }
}

extern "C" int tb5_put(tb5_handle* h, uint32_t peer, uint64_t remote_addr, const void* data, size_t len,
                       void* cookie, char* err, size_t errlen) {
  try {
    return h->engine->put(peer, remote_addr, {static_cast<const uint8_t*>(data), len}, cookie) ? 0 : 1;
  } catch (const std::exception& e) {
    set_err(err, errlen, e.what());
    return -1;
  }
}

extern "C" void tb5_set_sent_callback(tb5_handle* h, tb5_sent_fn sent, void* ctx) {
  h->engine->set_on_sent([sent, ctx](void* cookie) { sent(ctx, cookie); });
}

extern "C" int tb5_progress(tb5_handle* h, char* err, size_t errlen) {
  try {
    return h->engine->progress();
  } catch (const std::exception& e) {
    set_err(err, errlen, e.what());
    return -1;
  }
}

extern "C" int tb5_flush(tb5_handle* h, double timeout) {
  try {
    return h->engine->flush(timeout) ? 1 : 0;
  } catch (const std::exception&) {
    return 0;
  }
}

extern "C" void tb5_close(tb5_handle* h) {
  if (!h) return;
  {
    std::lock_guard lock(h->mu);
    h->stop = true;
  }
  h->cv.notify_all();
  if (h->heartbeat.joinable()) h->heartbeat.join();
  h->engine->close();
  delete h;
}

extern "C" const char* tb5_describe(tb5_handle* h) { return h->description.c_str(); }
extern "C" const char* tb5_backend(tb5_handle* h) { return h->backend.c_str(); }

extern "C" void tb5_get_stats(tb5_handle* h, tb5_stats* s) {
  const EngineStats e = h->engine->stats();
  *s = tb5_stats{e.messages_sent,      e.messages_delivered, e.frames_sent, e.retransmissions, e.acks_sent,
                 e.duplicates_dropped, e.out_of_window,      e.bad_frames,  e.reordered,       0, 0, 0, 0, 0, 0, 0,
                 e.puts_placed};
  if (h->faulty) {
    const FaultCounts c = h->faulty->counts();
    s->injected_lost = c.lost, s->injected_duplicated = c.duplicated, s->injected_reordered = c.reordered;
  }
  if (h->sim_counter) {
    s->sim_lost = h->sim_counter("lost"), s->sim_duplicated = h->sim_counter("duplicated");
    s->sim_reordered = h->sim_counter("reordered"), s->sim_stalls = h->sim_counter("stalls");
  }
}
