// The run configuration of `generate` and `score` (app/run_config.hpp),
// without MPI: every flag checked against a real converted model, each error
// of the kind and with the flag a user must change, and the shape, layout
// and threads a run would get, against values worked out by hand from the
// tiny model (3 layers, 10 experts, max_position_embeddings 256).
#define BOOST_TEST_MODULE run_config
#include <boost/test/unit_test.hpp>

#include <ostream>
#include <string>

#include "app/run_config.hpp"
#include "common/error.hpp"
#include "common/thread_pool.hpp"
#include "config/activations.hpp"
#include "expect_error.hpp"
#include "kernels/matmul_bf16.hpp"
#include "plan/layout.hpp"
#include "store/converter.hpp"
#include "synthetic_hf.hpp"

namespace trillion {
// For Boost.Test's messages.
std::ostream& operator<<(std::ostream& os, Activations a) { return os << to_string(a); }
}  // namespace trillion

using namespace trillion;
using namespace trillion::app;
using namespace trillion::test;

namespace {

// A converted tiny model (fp8 by default; "bf16" has no int8 copy to hold).
struct Model {
  TempDir tmp;
  std::string dir = tmp / "model";
  std::unique_ptr<ModelStore> store;
  explicit Model(const std::string& format = "fp8", bool mtp = false) {
    SyntheticOptions o;
    o.mtp = mtp;
    write_synthetic_checkpoint(tmp / "hf", tiny_config(format, mtp ? 1 : 0), o);
    convert_checkpoint(ConvertOptions{tmp / "hf", dir, 4, false, nullptr});
    store = ModelStore::open(dir);
  }
  RunOptions options() const {
    RunOptions o;
    o.model_dir = dir;
    return o;
  }
};

// One rank alone on a host of 8 cores and 64 GB.
RankPlace alone() { return RankPlace{1, 0, 1, 64e9, 8, 8, 64}; }

}  // namespace

BOOST_AUTO_TEST_CASE(flags_checked_before_the_model_opens) {
  RunOptions o;
  o.max_batch = 0;
  expect_error<InputError>([&] { check_run_flags(o); }, {"--max-batch must be at least 1"});
  o = RunOptions{};
  o.step_tokens = 0;
  expect_error<InputError>([&] { check_run_flags(o); }, {"--step-tokens"});
  o = RunOptions{};
  o.threads = thread_limit() + 1;
  expect_error<InputError>([&] { check_run_flags(o); }, {"--threads " + std::to_string(thread_limit() + 1), "exceeds"});
  o = RunOptions{};
  o.micro_batches = -1;
  expect_error<InputError>([&] { check_run_flags(o); }, {"--micro-batches"});
  o = RunOptions{};
  o.kv_cache_tokens = -5;
  expect_error<InputError>([&] { check_run_flags(o); }, {"--kv-cache-tokens"});
  o = RunOptions{};
  o.parallel = "tensor";
  expect_error<InputError>([&] { check_run_flags(o); }, {"tensor"});
  o = RunOptions{};
  o.activations = "int16";
  expect_error<InputError>([&] { check_run_flags(o); }, {"int16"});
  BOOST_CHECK_NO_THROW(check_run_flags(RunOptions{}));
}

BOOST_AUTO_TEST_CASE(a_pipeline_of_three_ranks) {
  Model m("bf16");
  RunOptions o = m.options();
  RankPlace p = alone();
  p.ranks = 3, p.rank = 2, p.ranks_on_host = 3;
  const RunConfig rc = configure_run(o, *m.store, p);
  BOOST_TEST(o.activations == "f32");  // auto on BF16
  BOOST_TEST(rc.shape.max_len == 256);  // min(max_position_embeddings 256, 4096)
  BOOST_TEST(rc.shape.slots == 8);
  BOOST_TEST(!rc.shape.speculative);
  BOOST_REQUIRE(rc.layout.size() == 3);
  // Three stages of the three layers between them, in order, the head on the last.
  int64_t next = 0;
  for (const RankShare& s : rc.layout.ranks) {
    BOOST_TEST(s.layers.begin == next);
    next = s.layers.end;
  }
  BOOST_TEST(next == 3);
  BOOST_TEST(rc.layout.ranks[0].layers.has_embed);
  BOOST_TEST(rc.layout.ranks[2].layers.has_head);
  // 8 cores among 3 ranks: 2 threads each, 6 threads on 8 hardware threads.
  BOOST_TEST(rc.threads == 2);
  BOOST_TEST(rc.cores_to_spare);
}

BOOST_AUTO_TEST_CASE(threads_follow_the_host) {
  Model m("bf16");
  RunOptions o = m.options();
  RankPlace p = alone();
  p.ranks = 3, p.ranks_on_host = 3, p.physical_cores = 2, p.hardware_threads = 2;
  RunConfig rc = configure_run(o, *m.store, p);
  BOOST_TEST(rc.threads == 1);        // at least one, even with fewer cores than ranks
  BOOST_TEST(!rc.cores_to_spare);     // 3 threads on 2 hardware threads: workers must not spin
  o.threads = 3;
  p = alone();
  rc = configure_run(o, *m.store, p);
  BOOST_TEST(rc.threads == 3);        // as given
  BOOST_TEST(rc.cores_to_spare);
}

BOOST_AUTO_TEST_CASE(flags_against_the_model) {
  Model m("bf16");
  RunOptions o = m.options();
  o.max_len = 257;
  expect_error<InputError>([&] { configure_run(o, *m.store, alone()); },
                           {"--max-len 257", "max_position_embeddings (256)"});
  o = m.options();
  o.speculative = "medusa";
  expect_error<InputError>([&] { configure_run(o, *m.store, alone()); }, {"--speculative must be mtp", "medusa"});
  o = m.options();
  o.speculative = "mtp";
  expect_error<InputError>([&] { configure_run(o, *m.store, alone()); }, {"has no MTP layer"});
  o = m.options();
  o.micro_batches = 9;  // --max-batch 8
  expect_error<InputError>([&] { configure_run(o, *m.store, alone()); }, {"--micro-batches 9 exceeds --max-batch 8"});
  o = m.options();
  o.parallel = "expert";
  o.max_batch = 100;
  o.micro_batches = 65;
  expect_error<InputError>([&] { configure_run(o, *m.store, alone()); }, {"at most 64 groups"});
  o = m.options();
  o.stages = "0-0,1-2";
  RankPlace two = alone();
  two.ranks = 2;
  const RunConfig rc = configure_run(o, *m.store, two);
  BOOST_TEST(rc.layout.ranks[0].layers.end == 1);  // the stages as given
}

BOOST_AUTO_TEST_CASE(speculation_with_an_mtp_layer) {
  Model m("bf16", /*mtp=*/true);
  RunOptions o = m.options();
  o.speculative = "mtp";
  BOOST_TEST(configure_run(o, *m.store, alone()).shape.speculative);
  o.head_split = "64";
  RankPlace two = alone();
  two.ranks = 2;
  expect_error<InputError>([&] { configure_run(o, *m.store, two); }, {"--speculative mtp needs the whole head"});
}

BOOST_AUTO_TEST_CASE(memory_is_checked_before_anything_is_allocated) {
  Model m("fp8");
  RunOptions o = m.options();
  RankPlace p = alone();
  BOOST_CHECK_NO_THROW(configure_run(o, *m.store, p));
  // auto on FP8: bf16 where this CPU runs it faster than f32, else the int8 copy (it fits 64 GB).
  BOOST_TEST(o.activations == (bf16_auto_faster() ? "bf16" : "int8"));
  // On the int8 path FP8 is held again as int8 groups: more than a 1 kB host has.
  o = m.options();
  o.activations = "int8";
  p.host_memory_bytes = 1000;
  expect_error<InputError>([&] { configure_run(o, *m.store, p); }, {"int8 copy of its linears", "--activations f32"});
  // On f32, the KV cache and activations alone: the error names a flag that would make them fit.
  o = m.options();
  o.activations = "f32";
  p.host_memory_bytes = 64e3;
  expect_error<InputError>([&] { configure_run(o, *m.store, p); }, {"--max-batch"});
  // Unknown memory (0) is not checked.
  p.host_memory_bytes = 0;
  o = m.options();
  BOOST_CHECK_NO_THROW(configure_run(o, *m.store, p));
}

// --activations auto (config/activations.hpp): INT8/INT4 on int8 and BF16 on
// f32 whatever the hosts; FP8 on bf16 where every rank's CPU runs it faster
// than f32, else int8 where the copy fits every rank, else f32.
BOOST_AUTO_TEST_CASE(auto_picks_the_fastest_path_that_fits) {
  for (const bool fits : {false, true})
    for (const bool fast : {false, true}) {
      BOOST_TEST(auto_activations(WeightFormat::int8_group, fits, fast) == Activations::int8);
      BOOST_TEST(auto_activations(WeightFormat::int4_group, fits, fast) == Activations::int8);
      BOOST_TEST(auto_activations(WeightFormat::bf16, fits, fast) == Activations::f32);
      BOOST_TEST(resolve_activations("f32", WeightFormat::fp8_block, fits, fast) == Activations::f32);
      BOOST_TEST(resolve_activations("bf16", WeightFormat::fp8_block, fits, fast) == Activations::bf16);
      BOOST_TEST(resolve_activations("int8", WeightFormat::fp8_block, fits, fast) == Activations::int8);
      BOOST_TEST(auto_weighs_hosts("auto", WeightFormat::fp8_block));
      BOOST_TEST(!auto_weighs_hosts("auto", WeightFormat::int4_group));
      BOOST_TEST(!auto_weighs_hosts("f32", WeightFormat::fp8_block));
    }
  BOOST_TEST(auto_activations(WeightFormat::fp8_block, true, false) == Activations::int8);
  BOOST_TEST(auto_activations(WeightFormat::fp8_block, true, true) == Activations::bf16);  // bf16 first, no copy
  BOOST_TEST(auto_activations(WeightFormat::fp8_block, false, true) == Activations::bf16);
  BOOST_TEST(auto_activations(WeightFormat::fp8_block, false, false) == Activations::f32);
  BOOST_TEST(resolve_activations("auto", WeightFormat::fp8_block, false, true) == Activations::bf16);
}

// One rank alone: its own memory and CPU decide; the int8 candidate is
// checked as an explicit --activations int8 is (layout, copy, the rest).
BOOST_AUTO_TEST_CASE(auto_on_fp8_weighs_the_int8_copy) {
  Model m("fp8");
  RankPlace p = alone();
  RunOptions o = m.options();
  o.max_batch = 1, o.max_len = 16, o.step_tokens = 1;
  BOOST_TEST(int8_copy_misfit(o, *m.store, p) == "");
  // Memory just short of the copy: int8 does not fit, f32 and bf16 read the
  // FP8 pages in place and do (the KV cache of 16 positions is far smaller).
  o.activations = "f32";
  const RunConfig f32 = configure_run(o, *m.store, p);
  const int64_t copy = share_int8_copy_bytes(m.store->config(), m.store->manifest(), f32.layout.ranks[0]);
  BOOST_REQUIRE(copy > 0);
  p.host_memory_bytes = double(copy);
  o = m.options();
  o.max_batch = 1, o.max_len = 16, o.step_tokens = 1;
  const std::string why = int8_copy_misfit(o, *m.store, p);
  BOOST_TEST(why.find("the int8 copy of its FP8 linears needs") == 0u, why);
  BOOST_CHECK_NO_THROW(configure_run(o, *m.store, p));
  BOOST_TEST(o.activations == (bf16_auto_faster() ? "bf16" : "f32"));
  // The explicit flag is refused there, as before.
  o.activations = "int8";
  expect_error<InputError>([&] { configure_run(o, *m.store, p); }, {"int8 copy of its linears", "--activations f32"});
  // BF16 models stay on f32 whatever the memory.
  Model b("bf16");
  o = b.options();
  configure_run(o, *b.store, alone());
  BOOST_TEST(o.activations == "f32");
}

BOOST_AUTO_TEST_CASE(auto_says_why) {
  BOOST_TEST(auto_activations_notice(Activations::bf16, "", "") ==
             "activations auto: bf16 (every rank's CPU has BF16 dot products faster than the f32 path; no int8 copy "
             "of the FP8 linears)");
  BOOST_TEST(auto_activations_notice(Activations::int8, "", "rank 0 (a)") ==
             "activations auto: int8 (rank 0 (a) has no BF16 dot products faster than the f32 path; the int8 copy of "
             "the FP8 linears fits every rank's memory)");
  const std::string misfit = "rank 2 (b): the int8 copy of its FP8 linears needs 700.0 GB, more than its 192.0 GB";
  BOOST_TEST(auto_activations_notice(Activations::f32, misfit, "rank 0 (a)") ==
             "activations auto: f32 (rank 0 (a) has no BF16 dot products faster than the f32 path; " + misfit + ")");
}
