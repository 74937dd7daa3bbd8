#include "calibrate/channel_probe.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <span>
#include <thread>

#include "runtime/backoff.hpp"

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

double sleeping_wait_wake_seconds(int trials) {
  using clock = std::chrono::steady_clock;
  // The setter stamps the moment it sets the flag; the waiter, no spins (as
  // where ranks outnumber cores) and allowed to sleep, subtracts it from
  // the moment it sees it. 3 ms: well past kYieldFor, so the wait sleeps.
  std::atomic<int64_t> stamp{0};
  double sum = 0;
  for (int i = 0; i < trials; ++i) {
    stamp.store(0);
    std::thread setter([&] {
      std::this_thread::sleep_for(Backoff::kYieldFor + std::chrono::milliseconds(2));
      stamp.store(clock::now().time_since_epoch().count(), std::memory_order_release);
    });
    Backoff backoff(0, true);
    int64_t t;
    while ((t = stamp.load(std::memory_order_acquire)) == 0) backoff.pause();
    sum += std::chrono::duration<double>(clock::now().time_since_epoch() - clock::duration(t)).count();
    setter.join();
  }
  return sum / std::max(1, trials);
}

}  // namespace trillion
