#include "parallel/exchange.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "common/error.hpp"
#include "runtime/backoff.hpp"

namespace trillion {

std::vector<std::vector<std::byte>> all_to_all(RmaChannel& ch, int32_t tag,
                                               std::vector<std::vector<std::byte>> out) {
  const int n = ch.size(), self = ch.rank();
  // A piece: [u64 total bytes of the message][payload]; half the ring at most,
  // so the next piece can be written while the receiver reads this one.
  const size_t ring = ch.config().slot_bytes * size_t(ch.config().slots_per_peer);
  const size_t payload = std::max<size_t>(64, ring / 2 > 8 ? ring / 2 - 8 : 64);
  std::vector<std::vector<std::byte>> in(static_cast<size_t>(n));
  std::vector<size_t> sent(static_cast<size_t>(n), 0), got(static_cast<size_t>(n), 0);
  std::vector<bool> send_done(static_cast<size_t>(n), false), recv_done(static_cast<size_t>(n), false);
  std::vector<bool> recv_started(static_cast<size_t>(n), false);
  in[size_t(self)] = std::move(out[size_t(self)]);
  send_done[size_t(self)] = recv_done[size_t(self)] = true;
  int pending = 2 * (n - 1);
  std::vector<std::byte> piece;
  Backoff backoff(ch.spins());
  while (pending > 0) {
    // One poll of the channel per round, not one per peer (rma_channel.hpp, refresh).
    ch.refresh(backoff.upkeep_due());
    bool progress = false;
    for (int d = 0; d < n; ++d) {
      if (send_done[size_t(d)]) continue;
      const auto& msg = out[size_t(d)];
      const size_t len = std::min(payload, msg.size() - sent[size_t(d)]);
      const uint64_t total = msg.size();
      piece.resize(8 + len);
      std::memcpy(piece.data(), &total, 8);
      if (len) std::memcpy(piece.data() + 8, msg.data() + sent[size_t(d)], len);
      if (ch.try_send_polled(d, tag, piece)) {
        progress = true;
        sent[size_t(d)] += len;
        if (sent[size_t(d)] == msg.size()) {
          send_done[size_t(d)] = true;
          --pending;
          out[size_t(d)].clear();
          out[size_t(d)].shrink_to_fit();
        }
      }
    }
    for (int s = 0; s < n; ++s) {
      if (recv_done[size_t(s)]) continue;
      auto m = ch.try_recv_polled(s);
      if (!m) continue;
      progress = true;
      if (m->tag != tag || m->data.size() < 8)
        throw Error("protocol error: expected an exchange piece (tag " + std::to_string(tag) + ") from rank " +
                    std::to_string(s) + ", got tag " + std::to_string(m->tag));
      uint64_t total;
      std::memcpy(&total, m->data.data(), 8);
      auto& dst = in[size_t(s)];
      if (!recv_started[size_t(s)]) {
        dst.resize(size_t(total));
        recv_started[size_t(s)] = true;
      }
      const size_t len = m->data.size() - 8;
      if (total != dst.size() || got[size_t(s)] + len > dst.size())
        throw Error("protocol error: exchange piece from rank " + std::to_string(s) + " does not fit its message");
      if (len) std::memcpy(dst.data() + got[size_t(s)], m->data.data() + 8, len);
      got[size_t(s)] += len;
      if (got[size_t(s)] == dst.size()) {
        recv_done[size_t(s)] = true;
        --pending;
      }
    }
    if (!progress) backoff.pause();
  }
  return in;
}

}  // namespace trillion
