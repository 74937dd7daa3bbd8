// A contiguous range of routed experts [begin, end), by global expert index:
// what a rank holds in expert parallel (plan/partition.hpp decides it) and
// what LocalExperts computes. Global indices survive partitioning.
#pragma once
#include <cstdint>

namespace trillion {

struct ExpertRange {
  int64_t begin = 0;  // first routed expert held
  int64_t end = 0;    // one past the last
  int64_t size() const { return end - begin; }
  bool contains(int64_t e) const { return e >= begin && e < end; }
};

}  // namespace trillion
