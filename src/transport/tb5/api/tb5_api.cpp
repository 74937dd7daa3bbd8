#include "transport/tb5/api/tb5_api.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

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

}  // namespace

struct tb5_handle {
  std::unique_ptr<Link> link;
  FaultyLink* faulty = nullptr;  // inside link, when faults are injected
  std::string backend, description;
  std::unique_ptr<Engine> engine;
  std::thread heartbeat;
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
};

extern "C" tb5_handle* tb5_open(const tb5_options* o, uint32_t self, uint32_t nranks, tb5_deliver_fn deliver,
                                tb5_dead_fn dead, void* ctx, char* err, size_t errlen) {
  try {
    auto h = std::make_unique<tb5_handle>();
    const std::string backend = str(o->backend);
    if (backend != "udp" && backend != "verbs" && backend != "auto")
      throw std::runtime_error("btl_tb5_backend must be udp, verbs or auto, not '" + backend + "'");
    if (backend != "udp") {
      try {
        h->link = open_verbs_link(str(o->verbs_library), str(o->verbs_device), o->mtu ? o->mtu : 1024, self, nranks);
        h->backend = "verbs";
      } catch (const std::exception& e) {
        if (backend == "verbs") throw;
      }
    }
    if (!h->link) {
      // 8 KiB datagrams: fewer system calls per byte; IP fragments them on a
      // 1500-byte link, and any lost fragment is one lost frame.
      h->link = std::make_unique<UdpLink>(choose_ipv4(str(o->if_include)), o->mtu ? o->mtu : 8192, nranks);
      h->backend = "udp";
    }
    FaultConfig fc{o->loss, o->duplicate, o->reorder, o->seed ? o->seed + self : 1 + self};
    if (fc.any()) {
      auto f = std::make_unique<FaultyLink>(std::move(h->link), fc);
      h->faulty = f.get();
      h->link = std::move(f);
    }
    h->description = h->link->describe();
    // Verbs: the window must fit the posted receives (acks take some too).
    const uint32_t asked = o->window ? o->window : 64;
    const uint32_t window = h->backend == "verbs" ? std::min<uint32_t>(asked, verbs_window) : asked;
    EngineConfig ec{window, o->rto, o->rto_max, o->heartbeat, o->peer_timeout};
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
  if (a.size() > cap) return 0;
  std::memcpy(buf, a.data(), a.size());
  return a.size();
}

extern "C" int tb5_connect(tb5_handle* h, uint32_t peer, const void* addr, size_t len, char* err, size_t errlen) {
  try {
    h->link->connect(peer, {static_cast<const uint8_t*>(addr), len});
    h->engine->add_peer(peer);
    return 0;
  } catch (const std::exception& e) {
    set_err(err, errlen, e.what());
    return -1;
  }
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
                 e.duplicates_dropped, e.out_of_window,      e.bad_frames,  e.reordered,       0, 0, 0};
  if (h->faulty) {
    const FaultCounts c = h->faulty->counts();
    s->injected_lost = c.lost, s->injected_duplicated = c.duplicated, s->injected_reordered = c.reordered;
  }
}
