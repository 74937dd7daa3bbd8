#include "parallel/exchange_queue.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

#include "common/error.hpp"
#include "runtime/backoff.hpp"

namespace trillion {
namespace {

double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

ExchangeQueue::ExchangeQueue(RmaChannel& channel)
    : ch_(channel), out_(size_t(channel.size())), partial_(size_t(channel.size())), ready_(size_t(channel.size())) {
  const size_t ring = ch_.config().slot_bytes * size_t(ch_.config().slots_per_peer);
  piece_payload_ = std::max<size_t>(64, ring / 2 > 8 ? ring / 2 - 8 : 64);
}

void ExchangeQueue::post(int dest, int32_t tag, std::vector<std::byte> data) {
  if (dest < 0 || dest >= ch_.size()) throw Error("ExchangeQueue: no rank " + std::to_string(dest));
  if (dest == ch_.rank()) {
    ready_[size_t(dest)].push_back(Incoming{tag, std::move(data), 0, true});
    return;
  }
  out_[size_t(dest)].push_back(Outgoing{tag, std::move(data)});
  // Start it now if it is first in line: the receiver may be ready before
  // this rank polls again (it goes on computing after a post).
  if (out_[size_t(dest)].size() == 1) {
    ch_.refresh();
    send_ready(dest);
  }
}

bool ExchangeQueue::send_ready(int dest) {
  auto& q = out_[size_t(dest)];
  bool moved = false;
  while (!q.empty()) {
    Outgoing& m = q.front();
    const size_t len = std::min(piece_payload_, m.data.size() - m.sent);
    const uint64_t total = m.data.size();
    piece_.resize(8 + len);
    std::memcpy(piece_.data(), &total, 8);
    if (len) std::memcpy(piece_.data() + 8, m.data.data() + m.sent, len);
    if (!ch_.try_send_polled(dest, m.tag, piece_)) break;
    moved = true;
    m.sent += len;
    if (m.sent == m.data.size()) q.pop_front();
  }
  return moved;
}

bool ExchangeQueue::receive_ready(int src) {
  bool moved = false;
  // Up to the end of one message, never further: what follows may not be
  // ours (the step's result comes after a rank's last exchange message).
  while (auto m = ch_.try_recv_polled(src)) {
    moved = true;
    Incoming& in = partial_[size_t(src)];
    if (m->data.size() < 8)
      throw Error("protocol error: a short exchange piece (tag " + std::to_string(m->tag) + ") from rank " +
                  std::to_string(src));
    uint64_t total;
    std::memcpy(&total, m->data.data(), 8);
    if (!in.started) {
      in.tag = m->tag;
      in.data.resize(size_t(total));
      in.started = true;
    }
    const size_t len = m->data.size() - 8;
    if (m->tag != in.tag || total != in.data.size() || in.got + len > in.data.size())
      throw Error("protocol error: an exchange piece from rank " + std::to_string(src) + " (tag " +
                  std::to_string(m->tag) + ") does not fit the message it continues");
    if (len) std::memcpy(in.data.data() + in.got, m->data.data() + 8, len);
    in.got += len;
    if (in.got == in.data.size()) {
      ready_[size_t(src)].push_back(std::move(in));
      in = Incoming{};
      break;
    }
  }
  return moved;
}

bool ExchangeQueue::sends_pending() const {
  return std::any_of(out_.begin(), out_.end(), [](const auto& q) { return !q.empty(); });
}

std::vector<std::byte> ExchangeQueue::take(int src, int32_t tag) {
  if (src < 0 || src >= ch_.size()) throw Error("ExchangeQueue: no rank " + std::to_string(src));
  auto& q = ready_[size_t(src)];
  if (q.empty()) {
    const auto t0 = std::chrono::steady_clock::now();
    Backoff backoff = ch_.backoff();
    while (q.empty()) {
      ch_.refresh(backoff.upkeep_due());
      // Receive only from src (a message from another rank may be followed by
      // one that is not ours to take), but keep every send moving: with
      // per-destination queues no rank waits on a ring another rank must empty.
      bool moved = receive_ready(src);
      for (int r = 0; r < ch_.size(); ++r)
        if (r != ch_.rank()) moved |= send_ready(r);
      if (!moved) backoff.pause();
    }
    wait_seconds_ += since(t0);
  }
  Incoming m = std::move(q.front());
  q.pop_front();
  if (m.tag != tag)
    throw Error("protocol error: expected an exchange message with tag " + std::to_string(tag) + " from rank " +
                std::to_string(src) + ", got tag " + std::to_string(m.tag));
  return std::move(m.data);
}

void ExchangeQueue::drain() {
  if (!sends_pending()) return;
  const auto t0 = std::chrono::steady_clock::now();
  Backoff backoff = ch_.backoff();
  while (sends_pending()) {
    ch_.refresh(backoff.upkeep_due());
    bool moved = false;
    for (int r = 0; r < ch_.size(); ++r)
      if (r != ch_.rank()) moved |= send_ready(r);
    if (!moved) backoff.pause();
  }
  wait_seconds_ += since(t0);
}

}  // namespace trillion
