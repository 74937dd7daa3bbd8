// The window layout arithmetic, without MPI.
#define BOOST_TEST_MODULE slot_layout
#include <boost/test/unit_test.hpp>

#include "runtime/slot_layout.hpp"

using trillion::SlotLayout;

BOOST_AUTO_TEST_CASE(chunks_cover_every_size) {
  SlotLayout l(4, 100, 3);
  BOOST_TEST(l.chunks(0) == 1u);  // an empty message still takes a slot
  BOOST_TEST(l.chunks(1) == 1u);
  BOOST_TEST(l.chunks(99) == 1u);
  BOOST_TEST(l.chunks(100) == 1u);
  BOOST_TEST(l.chunks(101) == 2u);
  BOOST_TEST(l.chunks(300) == 3u);
  BOOST_TEST(l.chunks(301) == 4u);
}

BOOST_AUTO_TEST_CASE(slots_are_aligned_and_disjoint) {
  SlotLayout l(3, 100, 4);
  BOOST_TEST(l.slot_stride() == 64u + 128u);
  BOOST_TEST(l.rings_offset() % 4096 == 0u);
  BOOST_TEST(l.rings_offset() >= l.credit_offset(2) + 64);
  // seq 1..slots map to consecutive slots of a ring; seq slots+1 wraps around.
  BOOST_TEST(l.slot_offset(0, 1) == l.rings_offset());
  BOOST_TEST(l.slot_offset(0, 2) == l.rings_offset() + l.slot_stride());
  BOOST_TEST(l.slot_offset(0, 5) == l.slot_offset(0, 1));
  BOOST_TEST(l.slot_offset(1, 1) == l.rings_offset() + 4 * l.slot_stride());
  BOOST_TEST(l.slot_offset(2, 4) + l.slot_stride() == l.window_bytes());
  for (int s = 0; s < 3; ++s)
    for (uint64_t q = 1; q <= 4; ++q) BOOST_TEST(l.slot_offset(s, q) % 64 == 0u);
}
