// All-to-all exchange over the RMA channel, deadlock-free for any message
// sizes: each message travels as pieces that fit the receiver's ring, and the
// loop drains incoming pieces while it waits for credits, so no rank can
// block the others by filling a ring nobody empties. Every rank must call it
// at the same point of the protocol (expert-parallel MoE layers do).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/rma_channel.hpp"

namespace trillion {

// Sends out[d] to every rank d != self (out[self] is moved to the result),
// and returns in[s], the message every rank s sent to this one.
std::vector<std::vector<std::byte>> all_to_all(RmaChannel& ch, int32_t tag,
                                               std::vector<std::vector<std::byte>> out);

}  // namespace trillion
