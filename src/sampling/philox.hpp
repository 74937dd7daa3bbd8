// Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy
// as 1, 2, 3", SC'11): a counter-based generator. The output is a pure
// function of (counter, key), so a request's random stream depends only on its
// seed (the key) and the token position (the counter), never on what else is
// in the batch or which rank samples it.
#pragma once
#include <array>
#include <cstdint>

namespace trillion {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

inline PhiloxCounter philox4x32_10(PhiloxCounter ctr, PhiloxKey key) {
  constexpr uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u;  // round multipliers
  constexpr uint32_t W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;  // key schedule (Weyl) increments
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += W0;
      key[1] += W1;
    }
    const uint64_t p0 = uint64_t(M0) * ctr[0], p1 = uint64_t(M1) * ctr[2];
    const uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0);
    const uint32_t hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
    ctr = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
  }
  return ctr;
}

// A uniform double in [0, 1) for (seed, position): 53 bits of one Philox block.
// `stream` tells apart independent numbers of one position (speculative
// decoding's draft, accept and residual draws, sampling/speculative.hpp);
// stream 0 is plain sampling's.
inline double philox_uniform(uint64_t seed, uint64_t position, uint32_t stream = 0) {
  const PhiloxCounter out = philox4x32_10({uint32_t(position), uint32_t(position >> 32), stream, 0},
                                          {uint32_t(seed), uint32_t(seed >> 32)});
  const uint64_t bits = (uint64_t(out[0]) << 32 | out[1]) >> 11;
  return double(bits) * 0x1.0p-53;
}

}  // namespace trillion
