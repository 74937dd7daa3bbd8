// PageArena (common/page_arena.hpp): blocks are aligned, zeroed, disjoint and
// writable across chunk edges and oversized blocks; bad alignments throw.
#define BOOST_TEST_MODULE page_arena
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <new>
#include <utility>
#include <vector>

#include "common/page_arena.hpp"

using trillion::PageArena;

namespace {
constexpr size_t kMiB = size_t(1) << 20;
bool aligned(const std::byte* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }
}  // namespace

BOOST_AUTO_TEST_CASE(blocks_are_aligned_zeroed_disjoint_and_keep_their_bytes) {
  PageArena arena(4 * kMiB);
  // Sizes that leave odd tails, fill a chunk exactly, and overflow one:
  // 1 MiB blocks fit four to a 4 MiB chunk, 3 MiB + 1 forces a new chunk,
  // 9 MiB is larger than a chunk (its own, rounded to 10 MiB).
  const std::vector<std::pair<size_t, size_t>> asks = {
      {1, 64}, {1000, 64}, {kMiB, 4096}, {kMiB, 64}, {kMiB, 64}, {3 * kMiB + 1, 64}, {9 * kMiB, 2 * kMiB}, {17, 1}};
  std::vector<std::pair<std::byte*, size_t>> got;
  for (size_t i = 0; i < asks.size(); ++i) {
    const auto [bytes, align] = asks[i];
    std::byte* p = arena.allocate(bytes, align);
    BOOST_TEST(aligned(p, align));
    bool zero = true;
    for (size_t j = 0; j < bytes; ++j) zero = zero && p[j] == std::byte{0};
    BOOST_TEST(zero, "block " << i << " is zeroed");
    for (size_t j = 0; j < bytes; ++j) p[j] = std::byte(uint8_t(i * 37 + j));
    got.emplace_back(p, bytes);
  }
  // Every block still holds what was written to it: none overlaps another.
  for (size_t i = 0; i < got.size(); ++i) {
    bool same = true;
    for (size_t j = 0; j < got[i].second; ++j) same = same && got[i].first[j] == std::byte(uint8_t(i * 37 + j));
    BOOST_TEST(same, "block " << i << " kept its bytes");
  }
  // Chunks, by hand. First 4 MiB chunk: 1 byte at 0, 1000 at 64, the three
  // 1 MiB blocks at 4096 (its alignment), 4096 + 1 MiB and 4096 + 2 MiB,
  // ending at 4096 + 3 MiB. 3 MiB + 1 does not fit the tail: a second 4 MiB
  // chunk. 9 MiB exceeds a chunk: its own, rounded up to 10 MiB. The 17 bytes
  // fit the newest chunk's tail.
  BOOST_TEST(arena.reserved_bytes() == 4 * kMiB + 4 * kMiB + 10 * kMiB);
}

BOOST_AUTO_TEST_CASE(alignments_that_are_not_powers_of_two_or_exceed_2_mib_throw) {
  PageArena arena;
  BOOST_CHECK_THROW(arena.allocate(8, 0), std::bad_alloc);
  BOOST_CHECK_THROW(arena.allocate(8, 48), std::bad_alloc);
  BOOST_CHECK_THROW(arena.allocate(8, 4 * kMiB), std::bad_alloc);
  BOOST_TEST(arena.reserved_bytes() == 0u);
  BOOST_TEST(aligned(arena.allocate(8, 2 * kMiB), 2 * kMiB));
}
