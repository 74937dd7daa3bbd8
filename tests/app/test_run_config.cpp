// The run configuration of `generate` and `score` (app/run_config.hpp),
// without MPI: every flag checked against a real converted model, each error
// of the kind and with the flag a user must change, and the shape, layout
// and threads a run would get, against values worked out by hand from the
// tiny model (3 layers, 10 experts, max_position_embeddings 256).
#define BOOST_TEST_MODULE run_config
#include <boost/test/unit_test.hpp>

#include <string>

#include "app/run_config.hpp"
#include "common/error.hpp"
#include "common/thread_pool.hpp"
#include "expect_error.hpp"
#include "store/converter.hpp"
#include "synthetic_hf.hpp"

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
  BOOST_TEST(o.activations == "f32");  // auto on FP8: read in place
  // On the int8 path FP8 is held again as int8 groups: more than a 1 kB host has.
  o = m.options();
  o.activations = "int8";
  p.host_memory_bytes = 1000;
  expect_error<InputError>([&] { configure_run(o, *m.store, p); }, {"int8 copy of its linears", "--activations f32"});
  // On f32, the KV cache and activations alone: the error names a flag that would make them fit.
  o = m.options();
  p.host_memory_bytes = 64e3;
  expect_error<InputError>([&] { configure_run(o, *m.store, p); }, {"--max-batch"});
  // Unknown memory (0) is not checked.
  p.host_memory_bytes = 0;
  o = m.options();
  BOOST_CHECK_NO_THROW(configure_run(o, *m.store, p));
}
