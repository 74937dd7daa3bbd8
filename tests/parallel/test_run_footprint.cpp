// Issue 10 item 2: a run's KV cache and activations are checked against the
// memory a rank has before anything is allocated, and the message names the
// flag to change and what would fit.
#define BOOST_TEST_MODULE run_footprint
#include <boost/test/unit_test.hpp>

#include <string>

#include "common/error.hpp"
#include "parallel/run_footprint.hpp"

using namespace trillion;

namespace {

ModelConfig tiny() {
  ModelConfig c;
  c.vocab_size = 512;
  c.hidden_size = 64;
  c.intermediate_size = 128;
  c.moe_intermediate_size = 32;
  c.num_hidden_layers = 4;
  c.num_attention_heads = 4;
  c.kv_lora_rank = 32;
  c.qk_nope_head_dim = 16;
  c.qk_rope_head_dim = 8;
  c.v_head_dim = 16;
  c.n_routed_experts = 8;
  c.n_shared_experts = 1;
  c.num_experts_per_tok = 2;
  return c;
}

std::string error_of(const RunShape& s, double memory) {
  try {
    check_run_memory(tiny(), s, 4, s.slots, memory);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

BOOST_AUTO_TEST_CASE(kv_cache_bytes_as_kv_cache_allocates_them) {
  RunShape s;
  s.slots = 3;
  s.max_len = 100;  // two blocks of 64 per slot
  const RunFootprint f = run_footprint(tiny(), s, 4, 3);
  BOOST_TEST(f.position_bytes == 4.0 * (32 + 8) * 4);
  BOOST_TEST(f.kv_positions == 3.0 * 128);
  BOOST_TEST(f.kv_bytes == 640.0 * 384);
  s.kv_tokens = 65;  // a pool: rounded up to blocks, whatever the slots
  BOOST_TEST(run_footprint(tiny(), s, 4, 3).kv_positions == 128.0);
  BOOST_TEST(run_footprint(tiny(), s, 4, 3).activation_bytes > 0);
}

BOOST_AUTO_TEST_CASE(a_pool_larger_than_memory_names_the_flag_and_what_fits) {
  RunShape s;
  s.slots = 8;
  s.max_len = 256;
  s.kv_tokens = 10'000'000'000;  // 6.4 TB of KV cache
  const std::string e = error_of(s, 1e9);
  BOOST_TEST_INFO(e);
  BOOST_TEST(e.find("--kv-cache-tokens 10000000000: the KV cache needs 6400.00 GB") == 0);
  BOOST_TEST(e.find("more than the 1.00 GB of memory this rank has") != std::string::npos);
  BOOST_TEST(e.find("(at most 15") != std::string::npos);  // ~1e9 / 640 bytes a position
  s.kv_tokens = 1024;
  BOOST_TEST(error_of(s, 1e9) == "no error");
}

BOOST_AUTO_TEST_CASE(slots_times_length_names_both_flags) {
  RunShape s;
  s.slots = 100000;
  s.max_len = 1 << 20;
  const std::string e = error_of(s, 16e9);
  BOOST_TEST_INFO(e);
  BOOST_TEST(e.find("--max-batch 100000 x --max-len 1048576: the KV cache needs") == 0);
  BOOST_TEST(e.find("give --kv-cache-tokens") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(step_activations_name_step_tokens) {
  RunShape s;
  s.slots = 8;
  s.max_len = 64;
  s.step_tokens = int64_t(1) << 40;  // a budget: no step holds more than 8 x 64 prefill tokens
  BOOST_TEST(s.max_step_rows() == 8 * 64 + 8);
  BOOST_TEST(error_of(s, 16e9) == "no error");
  s.slots = 100000;
  s.max_len = 1 << 20;
  s.kv_tokens = 64;
  const std::string e = error_of(s, 16e9);
  BOOST_TEST_INFO(e);
  BOOST_TEST(e.find("--step-tokens 1099511627776 with --max-batch 100000: one step's 104857700000 rows of "
                    "activations need") == 0);
  BOOST_TEST(e.find("step tokens + slots fit") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(physical_memory_is_known_here) { BOOST_TEST(physical_memory_bytes() > 1e8); }
