// Ordered messages between every pair of ranks over an RmaChannel that never
// block the sender: for exchanges that overlap with compute (the expert-
// parallel MoE layers, where a rank posts one group's dispatch and goes on to
// the next group's attention before anybody has received it).
//
// post() queues a message and sends whatever part fits the receiver's ring
// now; take() waits for the next message from one rank, and while it waits
// reads that rank's pieces and moves every queued send. Senders never block,
// each destination has its own queue, and a waiting rank reads from the rank
// it waits for: so a protocol that would be deadlock-free with unbounded
// buffers is deadlock-free here, whatever the message sizes and however
// much each rank posts before it receives. take() reads no further than the
// message it returns (what follows may be another protocol's message, such
// as the step's result after a rank's last exchange). Per (sender, receiver) pair,
// messages are taken in post order; every rank must post and take the same
// sequence of messages (the protocol's job, as with any channel).
//
// A message travels as pieces of at most half the ring ([u64 total][payload]),
// so the next piece can be written while the receiver reads this one.
// Before the channel is used directly again, drain() (queued pieces would
// otherwise interleave with the direct message).
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "runtime/rma_channel.hpp"

namespace trillion {

class ExchangeQueue {
 public:
  explicit ExchangeQueue(RmaChannel& channel);

  // Queues `data` for `dest` (this rank too: it is taken from the local queue).
  void post(int dest, int32_t tag, std::vector<std::byte> data);
  // The next message from `src`; throws Error if its tag is not `tag`.
  std::vector<std::byte> take(int src, int32_t tag);
  // Waits until every posted message has left this rank.
  void drain();
  // Seconds spent waiting in take() and drain().
  double wait_seconds() const { return wait_seconds_; }

 private:
  struct Outgoing {
    int32_t tag;
    std::vector<std::byte> data;
    size_t sent = 0;
  };
  struct Incoming {
    int32_t tag = 0;
    std::vector<std::byte> data;
    size_t got = 0;
    bool started = false;
  };
  bool send_ready(int dest);      // as many pieces as fit now
  bool receive_ready(int src);    // the pieces that have arrived, up to the end of one message
  bool sends_pending() const;

  RmaChannel& ch_;
  size_t piece_payload_;
  std::vector<std::deque<Outgoing>> out_;                  // per destination, in post order
  std::vector<Incoming> partial_;                          // per source, the message being assembled
  std::vector<std::deque<Incoming>> ready_;                // per source, complete and not yet taken
  std::vector<std::byte> piece_;
  double wait_seconds_ = 0;
};

}  // namespace trillion
