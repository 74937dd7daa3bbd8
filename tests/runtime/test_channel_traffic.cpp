// Many messages through RmaChannels: per-pair order, flow control against a
// slow receiver, all-to-all storms, ring pipelines, receive-from-any.
#include <sched.h>

#include <algorithm>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "channel_fixture.hpp"
#include "runtime/mpi_error.hpp"
#include "runtime/rma_channel.hpp"

using namespace trillion;
using trillion::test::env;
using trillion::test::has_pattern;
using trillion::test::mix;
using trillion::test::pattern;
using trillion::test::seed_of;

namespace {

// Deterministic size of message i from src to dest, in [0, max_bytes].
size_t size_of(int src, int dest, uint64_t i, size_t max_bytes) {
  return size_t(mix(seed_of(src, dest, i) ^ 0x5157) % (max_bytes + 1));
}

// One uint64 per rank in a window of its own (passive target, like the
// channel's): a rank publishes a count into a peer's cell, completed at the
// peer before publish() returns, and reads its own cell atomically.
class Counter {
 public:
  Counter() {
    auto guard = env().lock();
    mpi_check(MPI_Win_allocate(sizeof(uint64_t), sizeof(uint64_t), MPI_INFO_NULL, env().comm(), &cell_, &win_),
              "MPI_Win_allocate(counter)");
    *cell_ = 0;
    mpi_check(MPI_Win_lock_all(0, win_), "MPI_Win_lock_all(counter)");
    mpi_check(MPI_Win_sync(win_), "MPI_Win_sync(counter)");
    mpi_check(MPI_Barrier(env().comm()), "MPI_Barrier(counter)");  // every cell is 0 before anyone publishes
  }
  ~Counter() {
    auto guard = env().lock();
    MPI_Win_unlock_all(win_);
    MPI_Win_free(&win_);
  }
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;

  // Raises dest's cell to value; when this returns the update is in dest's memory.
  void publish(int dest, uint64_t value) {
    auto guard = env().lock();
    mpi_check(MPI_Accumulate(&value, 1, MPI_UINT64_T, dest, 0, 1, MPI_UINT64_T, MPI_MAX, win_),
              "MPI_Accumulate(counter)");
    mpi_check(MPI_Win_flush(dest, win_), "MPI_Win_flush(counter)");
  }
  uint64_t read() {
    auto guard = env().lock();
    const uint64_t none = 0;
    uint64_t v = 0;
    mpi_check(MPI_Fetch_and_op(&none, &v, MPI_UINT64_T, env().rank(), 0, MPI_NO_OP, win_),
              "MPI_Fetch_and_op(counter)");
    mpi_check(MPI_Win_flush(env().rank(), win_), "MPI_Win_flush(counter)");
    return v;
  }

 private:
  uint64_t* cell_ = nullptr;
  MPI_Win win_ = MPI_WIN_NULL;
};

}  // namespace

BOOST_AUTO_TEST_CASE(all_to_all_storm) {
  // Every rank sends kCount messages to every rank (itself included), sizes
  // 0..3 slots, without blocking: try_send and try_recv in one loop. Each
  // message is checked in order, so loss, duplication or reordering fails.
  constexpr uint64_t kCount = 1500;
  constexpr size_t kSlot = 256, kMax = 3 * kSlot;
  RmaChannel ch(env(), {.slot_bytes = kSlot, .slots_per_peer = 4, .name = "storm"});
  const int me = ch.rank(), n = ch.size();
  std::vector<uint64_t> sent(size_t(n), 0), received(size_t(n), 0);
  uint64_t bad = 0, bytes_in = 0, bytes_expected = 0, checksum_in = 0, checksum_out = 0;
  std::vector<std::byte> payload;
  for (bool done = false; !done;) {
    done = true;
    bool moved = false;
    for (int d = 0; d < n; ++d) {
      if (sent[size_t(d)] == kCount) continue;
      done = false;
      const uint64_t i = sent[size_t(d)];
      payload = pattern(size_of(me, d, i, kMax), seed_of(me, d, i));
      if (ch.try_send(d, int32_t(i), payload)) {
        moved = true;
        ++sent[size_t(d)];
        checksum_out += mix(seed_of(me, d, i) + payload.size());
      }
    }
    for (int s = 0; s < n; ++s) {
      if (received[size_t(s)] == kCount) continue;
      done = false;
      if (std::optional<Message> m = ch.try_recv(s)) {
        moved = true;
        const uint64_t i = received[size_t(s)]++;
        const size_t expected = size_of(s, me, i, kMax);
        if (m->tag != int32_t(i) || m->data.size() != expected || !has_pattern(m->data, seed_of(s, me, i))) ++bad;
        bytes_in += m->data.size();
        bytes_expected += expected;
        checksum_in += mix(seed_of(s, me, i) + m->data.size());
      }
    }
    // try_* never wait: a polling loop that made no progress must give the
    // core away, or with ranks > cores it starves the peers it waits for.
    if (!moved) sched_yield();
  }
  BOOST_TEST(bad == 0u);
  BOOST_TEST(bytes_in == bytes_expected);
  BOOST_TEST(ch.stats().messages_received == kCount * uint64_t(n));
  // What all ranks sent is what all ranks received.
  uint64_t local[2] = {checksum_out, checksum_in}, total[2] = {0, 0};
  {
    auto guard = env().lock();
    MPI_Allreduce(local, total, 2, MPI_UINT64_T, MPI_SUM, env().comm());
  }
  BOOST_TEST(total[0] == total[1]);
  env().barrier();
}

BOOST_AUTO_TEST_CASE(flow_control_slow_receiver) {
  // Pairs (0->1), (2->3): a fast sender, 2 slots. A sender may only reuse a
  // slot the receiver has consumed. The receiver publishes, before each
  // recv, how many receives it has begun (into the sender's memory, complete
  // before the recv starts, so before any credit it returns). After each
  // send the sender checks that the receiver had begun receiving the message
  // that last held the slot(s) just written: a send that went ahead without
  // a credit shows up as a count too low (or as an overwritten slot at the
  // receiver), whatever the timing. No sleeps, no clocks.
  constexpr int kSlots = 2;
  constexpr size_t kSlotBytes = 64;
  RmaChannel ch(env(), {.slot_bytes = kSlotBytes, .slots_per_peer = kSlots, .name = "flow"});
  Counter begun;  // at the sender: receives the receiver has begun
  const int me = ch.rank(), n = ch.size();
  const bool sender = me % 2 == 0 && me + 1 < n, receiver = me % 2 == 1;
  const int peer = sender ? me + 1 : me - 1;
  constexpr uint64_t kCount = 400;
  auto size_at = [](uint64_t i) -> size_t { return i == 0 ? 64 : i == 1 ? 7 : (i % 5 == 0 ? 200 : i % 64); };
  std::vector<uint64_t> message_of_slot;  // sender: the message each slot (by seq - 1) carried
  uint64_t early = 0;                     // sends that returned before their slots were freed
  auto sent = [&](uint64_t i) {
    const uint64_t chunks = std::max<uint64_t>(1, (size_at(i) + kSlotBytes - 1) / kSlotBytes);
    message_of_slot.insert(message_of_slot.end(), chunks, i);
    // The last slot written reused the one kSlots back: its message's receive had begun.
    if (message_of_slot.size() > size_t(kSlots)) {
      const uint64_t previous = message_of_slot[message_of_slot.size() - 1 - kSlots];
      const uint64_t seen = begun.read();
      if (seen < previous + 1) {
        ++early;
        BOOST_TEST_MESSAGE("send " << i << " returned when the receiver had begun " << seen << " receives");
      }
      return seen;
    }
    return uint64_t(0);
  };
  if (sender) {
    // Fill the ring while the receiver is held at the barrier: try_send must
    // refuse a third message instead of overwriting.
    ch.send(peer, 0, pattern(size_at(0), seed_of(me, peer, 0)));
    sent(0);
    ch.send(peer, 1, pattern(size_at(1), seed_of(me, peer, 1)));
    sent(1);
    BOOST_TEST(!ch.try_send(peer, 2, pattern(1, seed_of(me, peer, 2))));
    BOOST_TEST(begun.read() == 0u);  // nothing consumed: the ring is full
  }
  env().barrier();
  if (sender) {
    // Blocking sends from here on, up to 4 slots per message: twice the ring.
    // The first one found the ring full, so it can only have returned after a
    // credit for message 0's slot, i.e. after the receiver began its first receive.
    ch.send(peer, 2, pattern(size_at(2), seed_of(me, peer, 2)));
    BOOST_TEST(sent(2) >= 1u);
    for (uint64_t i = 3; i < kCount; ++i) {
      ch.send(peer, int32_t(i), pattern(size_at(i), seed_of(me, peer, i)));
      sent(i);
    }
    BOOST_TEST(early == 0u);
    BOOST_TEST(ch.stats().messages_sent == kCount);
  } else if (receiver) {
    uint64_t bad = 0;
    for (uint64_t i = 0; i < kCount; ++i) {
      begun.publish(peer, i + 1);
      Message m = ch.recv(peer);
      if (m.tag != int32_t(i) || m.data.size() != size_at(i) || !has_pattern(m.data, seed_of(peer, me, i))) ++bad;
    }
    BOOST_TEST(bad == 0u);
    BOOST_TEST(!ch.try_recv(peer).has_value());
  }
  env().barrier();
}

BOOST_AUTO_TEST_CASE(ring_pipeline) {
  // A pipeline schedule in miniature: rank 0 injects kInFlight micro-batches,
  // every stage receives from r-1, works, forwards to r+1; rank 0 gets them
  // back and re-injects. kInFlight <= slots, so blocking sends never deadlock.
  constexpr int kInFlight = 3, kRounds = 150;
  constexpr size_t kHidden = 700;  // floats: 2800 bytes, a multi-slot message
  RmaChannel ch(env(), {.slot_bytes = 1024, .slots_per_peer = 12, .name = "pipeline"});
  const int me = ch.rank(), n = ch.size();
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  std::vector<float> x(kHidden);
  auto bytes = [&] { return std::as_writable_bytes(std::span(x)); };
  uint64_t bad = 0;
  if (me == 0) {
    for (int mb = 0; mb < kInFlight; ++mb) {
      for (size_t j = 0; j < kHidden; ++j) x[j] = float(mb * 1000 + int(j));
      ch.send(next, mb, bytes());
    }
  }
  const int hops = kInFlight * kRounds;  // messages through each stage
  for (int h = 0; h < hops; ++h) {
    MessageInfo info = ch.recv_into(prev, bytes());
    const int mb = info.tag;
    // Every stage adds 1 after receiving; rank 0 injects round 0 unchanged,
    // so rank r > 0 sees round * n + r - 1 and rank 0 sees round * n + n - 1.
    const int round = h / kInFlight;
    const float add = float(round * n + (me == 0 ? n - 1 : me - 1));
    for (size_t j = 0; j < kHidden; ++j)
      if (x[j] != float(mb * 1000 + int(j)) + add) ++bad;
    if (info.bytes != kHidden * sizeof(float) || mb != h % kInFlight) ++bad;
    for (float& v : x) v += 1.0f;
    if (me == 0 && h >= hops - kInFlight) continue;  // drain: the last round stops here
    ch.send(next, mb, bytes());
  }
  BOOST_TEST(bad == 0u);
  env().barrier();
}

BOOST_AUTO_TEST_CASE(receive_from_any_keeps_per_source_order) {
  constexpr uint64_t kCount = 300;
  RmaChannel ch(env(), {.slot_bytes = 128, .slots_per_peer = 4, .name = "any"});
  const int me = ch.rank(), n = ch.size();
  if (me != 0) {
    for (uint64_t i = 0; i < kCount; ++i) ch.send(0, int32_t(i), pattern(i % 300, seed_of(me, 0, i)));
  } else {
    std::vector<uint64_t> next(size_t(n), 0);
    uint64_t bad = 0;
    for (uint64_t k = 0; k < kCount * uint64_t(n - 1); ++k) {
      Message m = ch.recv_any();
      if (m.src <= 0 || m.src >= n) {
        ++bad;
        continue;
      }
      const uint64_t i = next[size_t(m.src)]++;
      if (m.tag != int32_t(i) || !has_pattern(m.data, seed_of(m.src, 0, i)) || m.data.size() != i % 300) ++bad;
    }
    BOOST_TEST(bad == 0u);
    for (int s = 1; s < n; ++s) BOOST_TEST(next[size_t(s)] == kCount);
  }
  env().barrier();
}

BOOST_AUTO_TEST_CASE(posted_dispatch_to_every_rank) {
  // An expert-parallel layer in miniature: every rank posts one message to
  // every rank (itself included), flushes once, then receives one from each.
  // Sizes up to the whole ring (4 slots), so some layers need every credit.
  constexpr int kLayers = 200;
  constexpr size_t kSlot = 512;
  RmaChannel ch(env(), {.slot_bytes = kSlot, .slots_per_peer = 4, .name = "dispatch"});
  const int me = ch.rank(), n = ch.size();
  std::vector<std::vector<std::byte>> out(static_cast<size_t>(n));  // must outlive flush()
  uint64_t bad = 0;
  for (int layer = 0; layer < kLayers; ++layer) {
    for (int d = 0; d < n; ++d) {
      out[size_t(d)] = pattern(size_of(me, d, uint64_t(layer), 4 * kSlot), seed_of(me, d, uint64_t(layer)));
      ch.post(d, layer, out[size_t(d)]);
    }
    ch.flush();
    for (int s = 0; s < n; ++s) {
      Message m = ch.recv(s);
      if (m.tag != layer || m.data.size() != size_of(s, me, uint64_t(layer), 4 * kSlot) ||
          !has_pattern(m.data, seed_of(s, me, uint64_t(layer))))
        ++bad;
    }
  }
  BOOST_TEST(bad == 0u);
  BOOST_TEST(ch.stats().messages_sent == uint64_t(kLayers * n));
  env().barrier();
}

BOOST_AUTO_TEST_CASE(post_larger_than_the_ring_flushes_as_it_goes) {
  // A posted message larger than the ring must notify what it has put before
  // waiting for credits, or the receiver could never free a slot.
  RmaChannel ch(env(), {.slot_bytes = 100, .slots_per_peer = 2, .name = "post-big"});
  const int me = ch.rank(), n = ch.size();
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  auto data = pattern(1234, seed_of(me, next, 0));
  if (me == 0) {
    ch.post(next, 5, data);
    ch.flush();
    Message m = ch.recv(prev);
    BOOST_TEST((m.tag == 5 && has_pattern(m.data, seed_of(prev, me, 0))));
  } else {
    Message m = ch.recv(prev);
    BOOST_TEST((m.tag == 5 && has_pattern(m.data, seed_of(prev, me, 0))));
    ch.post(next, 5, data);
    ch.flush();
  }
  env().barrier();
}
