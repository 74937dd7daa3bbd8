// Single messages through an RmaChannel: every payload size edge, the
// receive variants, self-sends, statistics, and the collective check.
#include <boost/test/unit_test.hpp>

#include "channel_fixture.hpp"
#include "runtime/rma_channel.hpp"

using namespace trillion;
using trillion::test::env;
using trillion::test::has_pattern;
using trillion::test::pattern;
using trillion::test::seed_of;

namespace {

// Passes each size once around the ring r -> r+1: rank 0 sends first, the
// others receive then forward their own, so no rank blocks in a cycle of
// full rings even when a message is far larger than a ring.
void ring_pass(RmaChannel& ch, const std::vector<size_t>& sizes) {
  const int me = ch.rank(), n = ch.size();
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  for (size_t i = 0; i < sizes.size(); ++i) {
    auto send = [&] {
      auto data = pattern(sizes[i], seed_of(me, next, i));
      ch.send(next, int32_t(i), data);
    };
    auto recv = [&] {
      Message m = ch.recv(prev);
      BOOST_TEST(m.src == prev);
      BOOST_TEST(m.tag == int32_t(i));
      BOOST_TEST(m.data.size() == sizes[i]);
      BOOST_TEST(has_pattern(m.data, seed_of(prev, me, i)), "size " << sizes[i] << " from rank " << prev);
    };
    if (me == 0) {
      send();
      recv();
    } else {
      recv();
      send();
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(payload_size_edges) {
  const size_t slot = 4096;
  RmaChannel ch(env(), {.slot_bytes = slot, .slots_per_peer = 3, .name = "edges"});
  ring_pass(ch, {0, 1, slot - 1, slot, slot + 1, 3 * slot, 3 * slot + 1, 10 * slot + 17, 0, 2});
  env().barrier();
}

BOOST_AUTO_TEST_CASE(payload_100_mib) {
  RmaChannel ch(env(), {.slot_bytes = size_t(1) << 20, .slots_per_peer = 4, .name = "big"});
  ring_pass(ch, {size_t(100) << 20, (size_t(1) << 20) + 3});
  env().barrier();
}

BOOST_AUTO_TEST_CASE(receive_variants) {
  RmaChannel ch(env(), {.slot_bytes = 1000, .slots_per_peer = 8, .name = "variants"});
  const int me = ch.rank(), n = ch.size();
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  // The four messages (8 slots) fit the ring: everyone sends, then receives.
  const std::vector<size_t> sizes = {2500, 10, 3000, 0};
  for (size_t i = 0; i < sizes.size(); ++i) ch.send(next, int32_t(100 + i), pattern(sizes[i], seed_of(me, next, i)));

  // probe: the first message's header, not consumed.
  std::optional<MessageInfo> info;
  while (!(info = ch.probe(prev))) {
  }
  BOOST_TEST(info->src == prev);
  BOOST_TEST(info->tag == 100);
  BOOST_TEST(info->bytes == 2500u);

  // recv_into: a buffer too small throws before consuming anything...
  std::vector<std::byte> small(100), exact(2500);
  BOOST_CHECK_THROW(ch.recv_into(prev, small), Error);
  MessageInfo got = ch.recv_into(prev, exact);
  BOOST_TEST(got.bytes == 2500u);
  BOOST_TEST(has_pattern(exact, seed_of(prev, me, 0)));
  // ...and a larger buffer is fine.
  std::vector<std::byte> large(64);
  got = ch.recv_into(prev, large);
  BOOST_TEST(got.bytes == 10u);
  BOOST_TEST(has_pattern(std::span(large).first(10), seed_of(prev, me, 1)));

  // recv_chunks: zero-copy views in order, covering the message exactly.
  std::vector<std::byte> assembled;
  std::vector<size_t> chunk_sizes;
  got = ch.recv_chunks(prev, [&](const MessageInfo& m, size_t offset, std::span<const std::byte> c) {
    BOOST_TEST(m.bytes == 3000u);
    BOOST_TEST(offset == assembled.size());
    assembled.insert(assembled.end(), c.begin(), c.end());
    chunk_sizes.push_back(c.size());
  });
  BOOST_TEST(got.tag == 102);
  BOOST_TEST(chunk_sizes == (std::vector<size_t>{1000, 1000, 1000}));
  BOOST_TEST(has_pattern(assembled, seed_of(prev, me, 2)));

  // try_recv returns the empty message, then nothing.
  std::optional<Message> m;
  while (!(m = ch.try_recv(prev))) {
  }
  BOOST_TEST(m->data.empty());
  BOOST_TEST(m->tag == 103);
  env().barrier();  // nobody sends any more
  BOOST_TEST(!ch.try_recv(prev).has_value());
  BOOST_TEST(!ch.probe(prev).has_value());

  const ChannelStats& s = ch.stats();
  BOOST_TEST(s.messages_sent == 4u);
  BOOST_TEST(s.bytes_sent == 5510u);
  BOOST_TEST(s.messages_received == 4u);
  BOOST_TEST(s.bytes_received == 5510u);
}

BOOST_AUTO_TEST_CASE(send_to_self) {
  RmaChannel ch(env(), {.slot_bytes = 64, .slots_per_peer = 2, .name = "self"});
  const int me = ch.rank();
  ch.send(me, 1, pattern(64, 1));
  ch.send(me, 2, pattern(10, 2));
  // The ring is full and only this rank could drain it: an error, not a hang.
  BOOST_CHECK_THROW(ch.send(me, 3, pattern(1, 3)), Error);
  BOOST_TEST(!ch.try_send(me, 3, pattern(1, 3)));
  Message a = ch.recv(me);
  BOOST_TEST((a.tag == 1 && has_pattern(a.data, 1)));
  // One slot consumed (credit batched or not): room again for a one-slot message.
  BOOST_TEST(ch.try_send(me, 3, pattern(1, 3)));
  Message b = ch.recv(me), c = ch.recv(me);
  BOOST_TEST((b.tag == 2 && has_pattern(b.data, 2)));
  BOOST_TEST((c.tag == 3 && has_pattern(c.data, 3)));
  // A message larger than the ring cannot go to self with nobody receiving.
  BOOST_CHECK_THROW(ch.send(me, 4, pattern(1000, 4)), Error);
  env().barrier();
}

BOOST_AUTO_TEST_CASE(bad_peers_are_errors) {
  RmaChannel ch(env(), {.slot_bytes = 64, .slots_per_peer = 2, .name = "bad"});
  BOOST_CHECK_THROW(ch.send(ch.size(), 0, {}), Error);
  BOOST_CHECK_THROW(ch.recv(-1), Error);
  BOOST_CHECK_THROW(ch.probe(ch.size() + 5), Error);
  env().barrier();
}

BOOST_AUTO_TEST_CASE(check_all_reports_the_failing_rank_everywhere) {
  const int bad = env().size() - 1;
  env().check_all(true, "never shown");  // all fine: returns on every rank
  try {
    env().check_all(env().rank() != bad, "shard 7 is truncated");
    BOOST_FAIL("check_all returned although a rank failed");
  } catch (const CollectiveError& e) {
    const std::string expected = "rank " + std::to_string(bad) + " (" + env().host(bad) + "): shard 7 is truncated";
    BOOST_TEST(std::string(e.what()) == expected);
  }
  try {
    env().check_all(env().rank() == 0, "not rank 0");
    BOOST_FAIL("check_all returned although ranks failed");
  } catch (const CollectiveError& e) {
    std::string what = e.what();
    BOOST_TEST(what.find("rank 1 (") == 0u);
    if (env().size() > 2) BOOST_TEST(what.find("other rank(s) failed") != std::string::npos);
  }
}

// The same outcome returned, not thrown: every rank learns the lowest rank
// that voted no and its words (--activations auto chooses from them alike).
BOOST_AUTO_TEST_CASE(vote_tells_every_rank_the_first_no) {
  const MpiEnv::Vote yes = env().vote(true, "never shown");
  BOOST_TEST(yes.all);
  BOOST_TEST(yes.message.empty());
  const int n = env().size();
  const MpiEnv::Vote v = env().vote(env().rank() >= n / 2, "rank " + std::to_string(env().rank()) + " says no");
  if (n / 2 == 0) {
    BOOST_TEST(v.all);  // one rank: nobody below n / 2
  } else {
    BOOST_TEST(!v.all);
    BOOST_TEST(v.first == 0);
    BOOST_TEST(v.failed == n / 2);
    BOOST_TEST(v.message == "rank 0 says no");
  }
}

BOOST_AUTO_TEST_CASE(channel_config_must_agree) {
  ChannelConfig c{.slot_bytes = size_t(64 + env().rank()), .slots_per_peer = 2, .name = "mismatch"};
  BOOST_CHECK_THROW(RmaChannel(env(), c), CollectiveError);
  BOOST_CHECK_THROW(RmaChannel(env(), ChannelConfig{.slot_bytes = 0}), CollectiveError);
}
