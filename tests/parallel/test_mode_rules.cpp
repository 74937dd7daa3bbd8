// Issue 47: what a parallel mode asks of a run (parallel/mode_rules.hpp,
// plan/layout.hpp's takes_stages and modes_for), the questions the commands
// ask of a Layout instead of naming a mode. Expectations by hand.
#define BOOST_TEST_MODULE mode_rules
#include <boost/test/unit_test.hpp>

#include <string>

#include "common/error.hpp"
#include "parallel/mode_rules.hpp"

using namespace trillion;

namespace {

Layout layout_of(ParallelMode mode, int ranks) {
  Layout l;
  l.mode = mode;
  l.ranks.resize(size_t(ranks));
  return l;
}

RunShape groups(int micro_batches) {
  RunShape s;
  s.slots = 100;
  s.micro_batches = micro_batches;
  return s;
}

}  // namespace

BOOST_AUTO_TEST_CASE(kv_pool_slots) {
  // A pipeline stage caches every sequence; an expert rank its own, slot s on
  // rank s % ranks: 10 slots over 4 ranks are 3, 3, 2, 2, and every pool is
  // sized for the largest (3).
  BOOST_TEST(pool_slots(layout_of(ParallelMode::pipeline, 4), 10) == 10);
  BOOST_TEST(pool_slots(layout_of(ParallelMode::expert, 4), 10) == 3);
  BOOST_TEST(pool_slots(layout_of(ParallelMode::expert, 4), 8) == 2);
  BOOST_TEST(pool_slots(layout_of(ParallelMode::expert, 1), 10) == 10);
  // Fewer slots than ranks: a pool is still sized for one slot.
  BOOST_TEST(pool_slots(layout_of(ParallelMode::expert, 4), 2) == 1);
}

BOOST_AUTO_TEST_CASE(shape_limits) {
  check_mode_shape(layout_of(ParallelMode::expert, 2), groups(64));
  check_mode_shape(layout_of(ParallelMode::pipeline, 2), groups(65));  // in flight, not groups: no such limit
  try {
    check_mode_shape(layout_of(ParallelMode::expert, 2), groups(65));
    BOOST_FAIL("65 row groups in expert mode were accepted");
  } catch (const InputError& e) {
    const std::string m = e.what();
    BOOST_TEST(m.find("--micro-batches 65") != std::string::npos, m);
    BOOST_TEST(m.find("at most 64 groups") != std::string::npos, m);
  }
}

BOOST_AUTO_TEST_CASE(row_groups_for_metrics) {
  BOOST_TEST(row_groups(layout_of(ParallelMode::expert, 2), groups(0)) == 2);  // config/row_groups.hpp's default
  BOOST_TEST(row_groups(layout_of(ParallelMode::expert, 3), groups(5)) == 5);
  BOOST_TEST(row_groups(layout_of(ParallelMode::expert, 1), groups(5)) == 0);  // one rank: no exchange to hide
  BOOST_TEST(row_groups(layout_of(ParallelMode::pipeline, 3), groups(5)) == 0);
}

BOOST_AUTO_TEST_CASE(modes_and_stages) {
  BOOST_TEST(takes_stages(ParallelMode::pipeline));
  BOOST_TEST(!takes_stages(ParallelMode::expert));
  ModelConfig cfg;
  cfg.n_routed_experts = 8;
  BOOST_TEST(modes_for(cfg, 8).size() == 2u);
  BOOST_TEST((modes_for(cfg, 8)[1] == ParallelMode::expert));
  BOOST_TEST(modes_for(cfg, 9).size() == 1u);  // expert mode holds at least one expert per rank
  BOOST_TEST((modes_for(cfg, 9)[0] == ParallelMode::pipeline));
}
