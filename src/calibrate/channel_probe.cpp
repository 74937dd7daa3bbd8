#include "calibrate/channel_probe.hpp"

#include <algorithm>
#include <chrono>
#include <span>

namespace trillion {

// Round trips of `bytes` between ranks 0 and 1; returns one-way seconds.
double pingpong_channel(RmaChannel& ch, std::vector<std::byte>& buf, size_t bytes, int iters) {
  const int me = ch.rank();
  std::span<std::byte> msg(buf.data(), bytes);
  auto once = [&] {
    if (me == 0) {
      ch.send(1, 0, msg);
      ch.recv_into(1, msg);
    } else {
      ch.recv_into(0, msg);
      ch.send(0, 0, msg);
    }
  };
  for (int i = 0; i < std::max(2, iters / 10); ++i) once();  // warm-up
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) once();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters / 2;
}

}  // namespace trillion
