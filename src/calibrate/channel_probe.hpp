// What a hop between two ranks costs through RmaChannel (notified put,
// credits): bench_channel prints it next to MPI_Send/Recv, and `trillion
// calibrate` under mpirun writes latency and bandwidth into the link profile.
#pragma once
#include <cstddef>
#include <vector>

#include "runtime/rma_channel.hpp"

namespace trillion {

// Round trips of `bytes` between ranks 0 and 1 (both call it; other ranks
// must not); returns the one-way seconds (round trip / 2).
double pingpong_channel(RmaChannel& ch, std::vector<std::byte>& buf, size_t bytes, int iters);

// How late a wait that has begun to sleep (Backoff once it has yielded
// kYieldFor, as a rank's waits do where ranks share cores) notices a flag
// another thread sets: mean seconds over `trials` waits of ~3 ms each.
double sleeping_wait_wake_seconds(int trials);

}  // namespace trillion
