#define BOOST_TEST_MODULE partition
#include <boost/test/unit_test.hpp>

#include "common/error.hpp"
#include "plan/partition.hpp"

using namespace trillion;

BOOST_AUTO_TEST_CASE(pipeline_balances_bytes_with_embed_and_head) {
  // 4 equal layers of 10; embed 10 on stage 0, head 10 on stage 1.
  auto p = balance_pipeline({10, 10, 10, 10}, 10, 10, 2);
  BOOST_REQUIRE_EQUAL(p.size(), 2u);
  BOOST_TEST(p[0].begin == 0);
  BOOST_TEST(p[0].end == 2);
  BOOST_TEST(p[1].begin == 2);
  BOOST_TEST(p[1].end == 4);
  BOOST_TEST(p[0].has_embed);
  BOOST_TEST(!p[0].has_head);
  BOOST_TEST(p[1].has_head);
  BOOST_TEST(!p[1].has_embed);
}

BOOST_AUTO_TEST_CASE(pipeline_heavy_head_shifts_layers_forward) {
  // Hand-computed: layers 5 each, head 20 -> best split [0,4) = 20, [4,6) + 20 = 30?
  // vs [0,5) = 25, [5,6) + 20 = 25: the optimum is max 25.
  auto p = balance_pipeline({5, 5, 5, 5, 5, 5}, 0, 20, 2);
  BOOST_TEST(p[0].end == 5);
  BOOST_TEST(p[1].begin == 5);
}

BOOST_AUTO_TEST_CASE(pipeline_one_rank_holds_everything) {
  auto p = balance_pipeline({1, 2, 3}, 4, 5, 1);
  BOOST_REQUIRE_EQUAL(p.size(), 1u);
  BOOST_TEST(p[0].begin == 0);
  BOOST_TEST(p[0].end == 3);
  BOOST_TEST(p[0].has_embed);
  BOOST_TEST(p[0].has_head);
}

BOOST_AUTO_TEST_CASE(pipeline_every_stage_gets_a_layer) {
  auto p = balance_pipeline({100, 1, 1, 1}, 0, 0, 4);
  for (int s = 0; s < 4; ++s) BOOST_TEST(p[size_t(s)].size() == 1);
  BOOST_CHECK_THROW(balance_pipeline({1, 1}, 0, 0, 3), InputError);
}

BOOST_AUTO_TEST_CASE(stages_spec_parses_and_rejects) {
  auto p = parse_stages("0-1,2-2,3-5", 6, 3);
  BOOST_TEST(p[0].end == 2);
  BOOST_TEST(p[1].begin == 2);
  BOOST_TEST(p[1].end == 3);
  BOOST_TEST(p[2].end == 6);
  BOOST_TEST(p[2].has_head);
  BOOST_TEST(p[0].has_embed);
  auto msg = [](const char* spec, int64_t L, int n) {
    try {
      parse_stages(spec, L, n);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  BOOST_TEST(msg("0-1,3-5", 6, 2).find("starts at layer 3") != std::string::npos);
  BOOST_TEST(msg("0-1,2-4", 6, 2).find("layers 5..5 are not assigned") != std::string::npos);
  BOOST_TEST(msg("0-2,3-6", 6, 2).find("layer 6 does not exist") != std::string::npos);
  BOOST_TEST(msg("0-2,3-5", 6, 3).find("2 stages for 3 ranks") != std::string::npos);
  BOOST_TEST(msg("0-x", 6, 1).find("not a range") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(head_split_spec_parses_and_rejects) {
  BOOST_TEST(parse_head_split("") == -1);
  BOOST_TEST(parse_head_split("auto") == -1);
  BOOST_TEST(parse_head_split("0") == 0);
  BOOST_TEST(parse_head_split("12800") == 12800);
  for (const char* bad : {"-5", "12x", "x", "1e3"}) BOOST_CHECK_THROW(parse_head_split(bad), InputError);
}

BOOST_AUTO_TEST_CASE(experts_partition_is_contiguous_and_balanced) {
  for (int64_t E : {16, 48, 64, 256, 384}) {
    for (int N = 1; N <= 5; ++N) {
      int64_t next = 0;
      for (int r = 0; r < N; ++r) {
        auto er = experts_of_rank(E, N, r);
        BOOST_TEST(er.begin == next);
        BOOST_TEST((er.size() == E / N || er.size() == E / N + 1));
        for (int64_t e = er.begin; e < er.end; ++e) BOOST_TEST(owner_of_expert(E, N, e) == r);
        next = er.end;
      }
      BOOST_TEST(next == E);
    }
  }
  // Hand-computed: 16 experts on 3 ranks -> [0,5), [5,10), [10,16).
  BOOST_TEST(experts_of_rank(16, 3, 1).begin == 5);
  BOOST_TEST(experts_of_rank(16, 3, 2).begin == 10);
}
