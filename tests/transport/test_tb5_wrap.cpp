// The 32-bit sequence numbers wrapping at 2^32, for every window the engine
// can be given (1..64 frames: verbs uses 24, udp derives its own from the
// socket buffer, the default is 32). Receive slots used to be `seq % window`:
// 2^32 is not a multiple of 24, so at the wrap two frames in flight shared a
// slot, a frame was taken for another, a false selective ack stopped its
// retransmission, and the link hung with both ends alive. Each case starts a
// pair of engines just below 2^32 and pushes messages through the wrap under
// loss, duplication and reordering; every message must arrive once, whole,
// in order.
#define BOOST_TEST_MODULE tb5_wrap
#include <boost/test/unit_test.hpp>

#include <memory>
#include <random>

#include "memory_link.hpp"
#include "transport/tb5/core/engine.hpp"
#include "transport/tb5/core/faulty_link.hpp"
#include "transport/tb5/core/frame.hpp"

using namespace trillion::tb5;
using trillion::tb5::test::MemoryLink;
using trillion::tb5::test::MemoryNet;

namespace {

constexpr double tick = 1.0 / 1024;

std::vector<uint8_t> content(size_t n, uint64_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937_64 g(seed);
  for (auto& b : v) b = uint8_t(g());
  return v;
}

struct WrapRun {
  uint32_t lowest_seen = UINT32_MAX, highest_seen = 0;  // data sequence numbers on the wire
  bool delivered_all = false;
};

// Two engines starting at `first` exchange `count` messages each way (1 to 5
// frames each) over a lossy in-memory link, the clock a fake one.
WrapRun run(uint32_t window, uint32_t first, int count, double faults) {
  MemoryNet net(2);
  EngineConfig cfg;
  cfg.window = window;
  cfg.initial_seq = first;
  cfg.rto = 4 * tick;
  cfg.rto_max = 64 * tick;
  cfg.peer_timeout = 1e9;
  WrapRun out;
  net.filter = [&](uint32_t, uint32_t, std::span<const uint8_t> f) {
    auto d = decode_frame(f);
    if (d && d->header.type == FrameType::data) {
      out.lowest_seen = std::min(out.lowest_seen, d->header.seq);
      out.highest_seen = std::max(out.highest_seen, d->header.seq);
    }
    return 1;
  };
  std::unique_ptr<Link> link[2];
  std::unique_ptr<Engine> eng[2];
  std::vector<std::vector<uint8_t>> got[2], sent[2];
  double now = 0;
  for (uint32_t r = 0; r < 2; ++r) {
    link[r] = std::make_unique<FaultyLink>(std::make_unique<MemoryLink>(net, r, 256),
                                           FaultConfig{faults, faults, faults, 17 + window * 2 + r});
    eng[r] = std::make_unique<Engine>(
        *link[r], r, 2, cfg, [&got, r](uint32_t, uint8_t, std::span<const uint8_t> m) { got[r].emplace_back(m.begin(), m.end()); },
        [](uint32_t, double) {}, [&now] { return now; });
  }
  eng[0]->add_peer(1);
  eng[1]->add_peer(0);
  const size_t per = eng[0]->max_payload();
  for (int i = 0; i < count; ++i)
    for (uint32_t r = 0; r < 2; ++r) {
      sent[r].push_back(content(per * (1 + i % 5) - i % 3, 31 * i + r));
      std::span<const uint8_t> piece(sent[r].back());
      eng[r]->send(1 - r, uint8_t(i), {&piece, 1});
    }
  for (int step = 0; step < 400000; ++step) {
    if (got[0].size() == size_t(count) && got[1].size() == size_t(count) && eng[0]->all_acknowledged() &&
        eng[1]->all_acknowledged())
      break;
    eng[0]->progress();
    eng[1]->progress();
    now += tick;
  }
  out.delivered_all = true;
  for (uint32_t r = 0; r < 2; ++r) {
    if (got[r].size() != size_t(count)) {
      BOOST_TEST(got[r].size() == size_t(count), "window " << window << ": rank " << r << " got " << got[r].size()
                                                            << " of " << count);
      out.delivered_all = false;
      return out;
    }
    for (int i = 0; i < count; ++i)
      if (got[r][i] != sent[1 - r][i]) {
        BOOST_TEST_INFO("window " << window << ": message " << i << " to rank " << r << " differs");
        BOOST_TEST(false);
        out.delivered_all = false;
        break;
      }
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(messages_cross_the_wrap_under_loss) {
  for (uint32_t window = 1; window <= 64; ++window) {
    BOOST_TEST_CONTEXT("window " << window) {
      // ~100 frames each way before 2^32, ~500 after.
      const WrapRun r = run(window, uint32_t(-100), 200, 0.05);
      BOOST_TEST(r.delivered_all);
      BOOST_TEST(r.lowest_seen < 1000u);             // the numbers wrapped...
      BOOST_TEST(r.highest_seen >= uint32_t(-100));  // ...from just below 2^32
    }
  }
}

BOOST_AUTO_TEST_CASE(a_clean_link_crosses_the_wrap_too) {
  for (uint32_t window : {24u, 32u, 64u}) BOOST_TEST(run(window, uint32_t(-7), 100, 0.0).delivered_all);
}
