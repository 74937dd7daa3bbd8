// The reliability engine over an in-memory link with a fake clock: whole,
// ordered, exactly-once messages under loss, duplication and reordering;
// the window; retransmission backoff at hand-computed times; duplicate and
// reorder handling; a silent peer declared dead once, a departed one never;
// puts placed byte for byte where they say, in order with messages.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <string>

#include "memory_link.hpp"
#include "transport/tb5/core/engine.hpp"
#include "transport/tb5/core/faulty_link.hpp"
#include "transport/tb5/core/frame.hpp"

using namespace trillion::tb5;
using trillion::tb5::test::MemoryLink;
using trillion::tb5::test::MemoryNet;

namespace {

constexpr double tick = 1.0 / 1024;  // exact in binary: no rounding at timeout boundaries

struct Msg {
  uint32_t peer;
  uint8_t tag;
  std::vector<uint8_t> bytes;
};

std::vector<uint8_t> content(size_t n, uint64_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937_64 g(seed);
  for (auto& b : v) b = uint8_t(g());
  return v;
}

// Two engines (ranks 0 and 1) on one MemoryNet, each link optionally wrapped
// in a FaultyLink.
struct Pair {
  explicit Pair(EngineConfig cfg = {}, FaultConfig faults = {}, size_t mtu = 256) : net(2) {
    for (uint32_t r = 0; r < 2; ++r) {
      std::unique_ptr<Link> l = std::make_unique<MemoryLink>(net, r, mtu);
      if (faults.any()) {
        FaultConfig f = faults;
        f.seed += r;
        auto fl = std::make_unique<FaultyLink>(std::move(l), f);
        faulty[r] = fl.get();
        l = std::move(fl);
      }
      link[r] = std::move(l);
      eng[r] = std::make_unique<Engine>(
          *link[r], r, 2, cfg,
          [this, r](uint32_t p, uint8_t t, std::span<const uint8_t> m) {
            got[r].push_back({p, t, std::vector<uint8_t>(m.begin(), m.end())});
          },
          [this, r](uint32_t p, double) { dead[r].push_back(p); }, [this] { return now; });
    }
    eng[0]->add_peer(1);
    eng[1]->add_peer(0);
  }
  void send(uint32_t from, uint8_t tag, const std::vector<uint8_t>& m) {
    std::span<const uint8_t> piece(m);
    eng[from]->send(1 - from, tag, {&piece, 1});
  }
  // Steps both engines, one tick apart, until pred() or max_steps.
  bool run_until(const std::function<bool()>& pred, int max_steps = 200000) {
    for (int i = 0; i < max_steps; ++i) {
      if (pred()) return true;
      eng[0]->progress();
      eng[1]->progress();
      now += tick;
    }
    return pred();
  }
  MemoryNet net;
  double now = 0;
  std::unique_ptr<Link> link[2];
  FaultyLink* faulty[2] = {nullptr, nullptr};
  std::unique_ptr<Engine> eng[2];
  std::vector<Msg> got[2];
  std::vector<uint32_t> dead[2];
};

// Sends `count` messages each way, sizes cycling through the fragment
// boundaries, and checks every one arrives once, in order, intact.
void exchange_and_check(Pair& p, int count) {
  const size_t per = p.eng[0]->max_payload();
  const size_t sizes[] = {0, 1, per - 1, per, per + 1, 3 * per + 5, 20000};
  std::vector<std::vector<uint8_t>> sent[2];
  for (int i = 0; i < count; ++i)
    for (uint32_t from = 0; from < 2; ++from) {
      sent[from].push_back(content(sizes[i % 7], 1000 * from + i));
      p.send(from, uint8_t(i % 200), sent[from].back());
    }
  BOOST_REQUIRE(p.run_until([&] { return p.got[0].size() >= size_t(count) && p.got[1].size() >= size_t(count); }));
  p.run_until([] { return false; }, 2000);  // late duplicates must not add anything
  for (uint32_t to = 0; to < 2; ++to) {
    BOOST_REQUIRE_EQUAL(p.got[to].size(), size_t(count));
    for (int i = 0; i < count; ++i) {
      const Msg& m = p.got[to][i];
      BOOST_TEST(m.peer == 1 - to);
      BOOST_TEST(int(m.tag) == i % 200);
      BOOST_TEST((m.bytes == sent[1 - to][i]), "message " << i << " to rank " << to);
    }
  }
  BOOST_TEST(p.eng[0]->all_acknowledged());
  BOOST_TEST(p.eng[1]->all_acknowledged());
}

}  // namespace

BOOST_AUTO_TEST_CASE(messages_arrive_whole_and_in_order) {
  Pair p;
  exchange_and_check(p, 70);
  BOOST_TEST(p.eng[0]->stats().retransmissions == 0u);  // nothing lost, nothing resent
}

BOOST_AUTO_TEST_CASE(one_percent_faults) {
  Pair p({}, FaultConfig{0.01, 0.01, 0.01, 7});
  exchange_and_check(p, 300);
  BOOST_TEST(p.faulty[0]->counts().lost > 0u);
}

BOOST_AUTO_TEST_CASE(five_percent_faults) {
  Pair p({}, FaultConfig{0.05, 0.05, 0.05, 11});
  exchange_and_check(p, 300);
  const auto c = p.faulty[0]->counts();
  BOOST_TEST(c.lost > 0u);
  BOOST_TEST(c.duplicated > 0u);
  BOOST_TEST(c.reordered > 0u);
  const auto s = p.eng[1]->stats();
  BOOST_TEST(s.duplicates_dropped > 0u);
  BOOST_TEST(p.eng[0]->stats().retransmissions > 0u);
}

BOOST_AUTO_TEST_CASE(window_bounds_frames_in_flight) {
  EngineConfig cfg;
  cfg.window = 8;
  Pair p(cfg);
  p.send(0, 1, content(100 * p.eng[0]->max_payload(), 3));  // 100 frames
  for (int i = 0; i < 5; ++i) p.eng[0]->progress();         // rank 1 never answers; time stands still
  BOOST_TEST(p.net.inbox[1].size() == 8u);
}

BOOST_AUTO_TEST_CASE(retransmission_backs_off_to_the_ceiling) {
  EngineConfig cfg;
  cfg.rto = 8 * tick;
  cfg.rto_max = 32 * tick;
  cfg.peer_timeout = 1e9;
  Pair p(cfg);
  std::vector<long> sent_at;  // in ticks
  p.net.filter = [&](uint32_t from, uint32_t, std::span<const uint8_t> f) {
    auto d = decode_frame(f);
    if (from == 0 && d && d->header.type == FrameType::data) sent_at.push_back(long(p.now / tick));
    return 0;  // everything is lost
  };
  p.send(0, 1, {42});
  p.run_until([] { return false; }, 150);
  // First send at 0, then after 8, 16, 32, 32, 32 ... ticks.
  const std::vector<long> expect = {0, 8, 24, 56, 88, 120};
  BOOST_TEST(sent_at == expect, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(duplicates_dropped_and_reordered_frames_restored) {
  Pair p;
  std::vector<std::vector<uint8_t>> held;
  p.net.filter = [&](uint32_t from, uint32_t, std::span<const uint8_t> f) {
    if (from != 0) return 1;
    held.emplace_back(f.begin(), f.end());
    return 0;
  };
  const auto m = content(5 * p.eng[0]->max_payload(), 9);  // 5 fragments
  p.send(0, 77, m);
  BOOST_REQUIRE_EQUAL(held.size(), 5u);
  p.net.filter = nullptr;
  for (auto it = held.rbegin(); it != held.rend(); ++it) {  // reversed, each twice
    p.net.inbox[1].push_back(*it);
    p.net.inbox[1].push_back(*it);
  }
  p.eng[1]->progress();
  BOOST_REQUIRE_EQUAL(p.got[1].size(), 1u);
  BOOST_TEST((p.got[1][0].bytes == m));
  BOOST_TEST(p.got[1][0].tag == 77);
  const auto s = p.eng[1]->stats();
  BOOST_TEST(s.duplicates_dropped == 5u);
  BOOST_TEST(s.reordered == 4u);  // all but the first fragment came early
  // The ack it sends releases the sender.
  p.run_until([&] { return p.eng[0]->all_acknowledged(); }, 10);
  BOOST_TEST(p.eng[0]->all_acknowledged());
}

BOOST_AUTO_TEST_CASE(a_silent_peer_is_declared_dead_once) {
  EngineConfig cfg;
  cfg.peer_timeout = 1.0;
  Pair p(cfg);
  // Rank 1 heartbeats every 256 ticks (0.25 s) for 5 s: alive.
  for (int i = 0; i < 5 * 1024; ++i) {
    if (i % 256 == 0) p.eng[1]->send_heartbeats();
    p.eng[0]->progress();
    p.now += tick;
  }
  BOOST_TEST(p.dead[0].empty());
  // Then it goes silent: dead after a bit more than 1 s, and only once.
  const double silent_from = p.now;
  double declared = -1;
  for (int i = 0; i < 3 * 1024; ++i) {
    p.eng[0]->progress();
    if (!p.dead[0].empty() && declared < 0) declared = p.now;
    p.now += tick;
  }
  BOOST_REQUIRE_EQUAL(p.dead[0].size(), 1u);
  BOOST_TEST(p.dead[0][0] == 1u);
  // The last heartbeat was at most 0.25 s before silent_from.
  BOOST_TEST(declared - silent_from > 1.0 - 0.25);
  BOOST_TEST(declared - silent_from <= 1.0 + 2 * tick);
  // What the death message tells: the 20 heartbeats heard (i = 0, 256, ...,
  // 4864), nothing from anyone since, nothing owed, none sent by rank 0.
  const std::string report = p.eng[0]->peer_report(1);
  BOOST_TEST_INFO(report);
  BOOST_TEST(report.find("20 frames heard from it") != std::string::npos);
  BOOST_TEST(report.find("0 frames unacknowledged of 0 queued, 0 heartbeats sent") != std::string::npos);
  char since[64];
  std::snprintf(since, sizeof since, "last frame from any peer %.1f s ago", p.now - (silent_from - 256 * tick));
  BOOST_TEST(report.find(since) != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_peer_that_said_bye_is_not_dead) {
  EngineConfig cfg;
  cfg.peer_timeout = 1.0;
  Pair p(cfg);
  p.eng[1]->close();
  for (int i = 0; i < 4 * 1024; ++i) {
    p.eng[0]->progress();
    p.now += tick;
  }
  BOOST_TEST(p.dead[0].empty());
}

// The byes go out in rounds: with the first four lost on the wire, the
// fifth still tells rank 0 that rank 1 left rather than died.
BOOST_AUTO_TEST_CASE(a_bye_survives_losing_the_first_rounds) {
  EngineConfig cfg;
  cfg.peer_timeout = 1.0;
  Pair p(cfg);
  int from1 = 0;
  p.net.filter = [&](uint32_t from, uint32_t, std::span<const uint8_t>) { return from == 1 && from1++ < 4 ? 0 : 1; };
  p.eng[1]->close();
  BOOST_TEST(from1 == 5);  // five rounds, one bye each
  for (int i = 0; i < 4 * 1024; ++i) {
    p.eng[0]->progress();
    p.now += tick;
  }
  BOOST_TEST(p.dead[0].empty());
}

BOOST_AUTO_TEST_CASE(garbage_and_strangers_are_ignored) {
  Pair p;
  p.net.inbox[1].push_back(std::vector<uint8_t>(100, 0x55));
  FrameHeader h;
  h.type = FrameType::data;
  h.src = 7;  // not in a 2-rank job
  h.nfrags = 1;
  std::vector<uint8_t> f(frame_header_size);
  encode_frame(h, {}, f.data());
  p.net.inbox[1].push_back(f);
  p.eng[1]->progress();
  BOOST_TEST(p.got[1].empty());
  BOOST_TEST(p.eng[1]->stats().bad_frames == 2u);
}

BOOST_AUTO_TEST_CASE(flush_waits_for_acknowledgement) {
  Pair p;
  p.send(0, 1, content(3000, 5));
  // flush() on rank 0 alone cannot succeed: rank 1 must acknowledge. The
  // fake clock does not move, so give flush a zero timeout.
  BOOST_TEST(!p.eng[0]->flush(0.0));
  BOOST_TEST(!p.eng[0]->all_acknowledged());
  p.eng[1]->progress();              // receives and acknowledges
  BOOST_TEST(p.eng[0]->flush(0.0));  // flush reads the ack
}

// Puts (the BTL's emulated RDMA write): each lands byte for byte at the
// address it names and nowhere else, in order with the messages around it,
// under loss, duplication and reordering; its cookie comes back once, after
// the receiver has placed every byte.
BOOST_AUTO_TEST_CASE(puts_land_in_place_in_order_under_faults) {
  Pair p({}, FaultConfig{0.05, 0.05, 0.05, 23});
  const size_t per = p.eng[0]->max_payload();
  // A put's first frame carries its 8-byte address: sizes around both edges.
  const size_t sizes[] = {0, 1, per - 9, per - 8, per - 7, 2 * per - 8, 3 * per + 5, 20000};
  constexpr size_t guard = 16;
  const int count = 40;
  std::vector<std::vector<uint8_t>> src(count), dst(count);
  std::vector<int> cookies(count), back_count(count, 0);
  std::vector<void*> back;
  p.eng[0]->set_on_sent([&](void* c) {
    const int i = int(static_cast<int*>(c) - cookies.data());
    // Acknowledged means placed: every byte is there already.
    BOOST_TEST((std::equal(src[i].begin(), src[i].end(), dst[i].begin() + guard)), "put " << i);
    ++back_count[i];
  });
  std::vector<int> puts_complete_at_message;  // per message: how many puts were whole when it arrived
  p.got[1].reserve(count);
  for (int i = 0; i < count; ++i) {
    src[i] = content(sizes[i % 8], 500 + i);
    dst[i].assign(src[i].size() + 2 * guard, 0xEE);
    BOOST_TEST(p.eng[0]->put(1, uint64_t(uintptr_t(dst[i].data() + guard)), src[i], &cookies[i]));
    p.send(0, 9, content(10, i));  // a message after each put
  }
  BOOST_REQUIRE(p.run_until([&] { return p.got[1].size() >= size_t(count) && p.eng[0]->all_acknowledged(); }));
  p.run_until([] { return false; }, 2000);  // late duplicates must not write again
  for (int i = 0; i < count; ++i) {
    BOOST_TEST((std::equal(src[i].begin(), src[i].end(), dst[i].begin() + guard)), "put " << i);
    for (size_t g = 0; g < guard; ++g) {
      BOOST_TEST(dst[i][g] == 0xEE, "put " << i << " wrote before its start");
      BOOST_TEST(dst[i][guard + src[i].size() + g] == 0xEE, "put " << i << " wrote past its end");
    }
    BOOST_TEST(back_count[i] == 1, "put " << i << " completed " << back_count[i] << " times");
  }
  BOOST_REQUIRE_EQUAL(p.got[1].size(), size_t(count));  // puts deliver nothing; the messages all arrive
  BOOST_TEST(p.eng[1]->stats().puts_placed == uint64_t(count));
  BOOST_TEST(p.faulty[0]->counts().lost > 0u);
}

// A message sent after a put is delivered only once the put is in place:
// ob1's FIN, which tells the receiver its buffer is full, relies on it.
BOOST_AUTO_TEST_CASE(a_message_after_a_put_finds_it_in_place) {
  Pair p({}, FaultConfig{0.05, 0.0, 0.05, 5});
  std::vector<uint8_t> src = content(5000, 3), dst(5000, 0);
  bool whole_at_delivery = false;
  p.eng[1] = std::make_unique<Engine>(
      *p.link[1], 1, 2, EngineConfig{},
      [&](uint32_t, uint8_t, std::span<const uint8_t>) { whole_at_delivery = dst == src; },
      [](uint32_t, double) {}, [&p] { return p.now; });
  p.eng[1]->add_peer(0);
  BOOST_TEST(p.eng[0]->put(1, uint64_t(uintptr_t(dst.data())), src, nullptr));
  p.send(0, 1, content(3, 1));
  BOOST_REQUIRE(p.run_until([&] { return p.eng[0]->all_acknowledged() && p.eng[1]->stats().messages_delivered == 1; }));
  BOOST_TEST(whole_at_delivery);
}

// A put frame without its address, or one that breaks into another message,
// is a protocol error naming the sender (the BTL ends the job with it).
BOOST_AUTO_TEST_CASE(malformed_puts_are_errors) {
  auto raw = [](FrameType type, uint32_t msg_len, uint32_t frag, uint32_t nfrags, std::vector<uint8_t> payload) {
    FrameHeader h;
    h.type = type;
    h.src = 0;
    h.seq = 0;
    h.msg_len = msg_len;
    h.frag = frag;
    h.nfrags = nfrags;
    std::vector<uint8_t> f(frame_header_size + payload.size());
    encode_frame(h, payload, f.data());
    return f;
  };
  auto error_of = [](Pair& p) -> std::string {
    try {
      p.eng[1]->progress();
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  };
  {
    Pair p;
    p.net.inbox[1].push_back(raw(FrameType::put, 4, 0, 1, {1, 2, 3, 4}));
    BOOST_TEST(error_of(p) == "tb5: put without an address from rank 0");
  }
  {
    Pair p;  // a data message's first fragment, then (next in sequence) a put's second
    p.net.inbox[1].push_back(raw(FrameType::data, 20, 0, 2, std::vector<uint8_t>(10, 1)));
    FrameHeader h;
    h.type = FrameType::put;
    h.src = 0;
    h.seq = 1;
    h.msg_len = 20;
    h.frag = 1;
    h.nfrags = 2;
    std::vector<uint8_t> f(frame_header_size + 10);
    encode_frame(h, std::vector<uint8_t>(10, 2), f.data());
    p.net.inbox[1].push_back(f);
    BOOST_TEST(error_of(p) == "tb5: fragment out of sequence from rank 0");
  }
}

// Frame checksums leave payloads out where the link checks them (udp) and
// only there, unless configured; each frame says which it is, so two ends
// that differ still understand each other.
BOOST_AUTO_TEST_CASE(payload_hashing_follows_the_link_and_the_config) {
  for (int forced : {-1, 1, 0}) {
    MemoryNet net(2);
    MemoryLink l0(net, 0), l1(net, 1);
    l0.checks = true;  // rank 0's link checks payloads, rank 1's does not
    EngineConfig cfg;
    cfg.payload_hash = forced;
    std::vector<std::vector<uint8_t>> got[2];
    double now = 0;
    auto make = [&](MemoryLink& l, uint32_t r) {
      return std::make_unique<Engine>(
          l, r, 2, cfg, [&got, r](uint32_t, uint8_t, std::span<const uint8_t> m) { got[r].emplace_back(m.begin(), m.end()); },
          [](uint32_t, double) {}, [&now] { return now; });
    };
    auto e0 = make(l0, 0), e1 = make(l1, 1);
    e0->add_peer(1);
    e1->add_peer(0);
    int unhashed[2] = {0, 0}, hashed[2] = {0, 0};
    net.filter = [&](uint32_t from, uint32_t, std::span<const uint8_t> f) {
      auto d = decode_frame(f);
      if (d && d->header.type == FrameType::data) ++(d->header.unhashed ? unhashed : hashed)[from];
      return 1;
    };
    const auto m0 = content(700, 1), m1 = content(700, 2);
    std::span<const uint8_t> s0(m0), s1(m1);
    e0->send(1, 1, {&s0, 1});
    e1->send(0, 1, {&s1, 1});
    for (int i = 0; i < 20; ++i, now += tick) e0->progress(), e1->progress();
    BOOST_REQUIRE(got[1].size() == 1u && got[0].size() == 1u);
    BOOST_TEST((got[1][0] == m0));
    BOOST_TEST((got[0][0] == m1));
    const bool rank0_hashes = forced == 1 || (forced == -1 && !l0.checks);
    const bool rank1_hashes = forced != 0;
    BOOST_TEST((rank0_hashes ? hashed[0] : unhashed[0]) > 0, "config " << forced);
    BOOST_TEST((rank0_hashes ? unhashed[0] : hashed[0]) == 0, "config " << forced);
    BOOST_TEST((rank1_hashes ? hashed[1] : unhashed[1]) > 0, "config " << forced);
    BOOST_TEST((rank1_hashes ? unhashed[1] : hashed[1]) == 0, "config " << forced);
  }
}
