#define BOOST_TEST_MODULE predict
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cmath>
#include <string>

#include "common/error.hpp"
#include "plan/predict.hpp"
#include "runtime/backoff.hpp"

using namespace trillion;
namespace tt = boost::test_tools;

namespace {

// A predicate for BOOST_CHECK_EXCEPTION: the error's message holds `part`.
auto says(std::string part) {
  return [part](const std::exception& e) {
    const bool ok = std::string(e.what()).find(part) != std::string::npos;
    if (!ok) BOOST_TEST_MESSAGE("'" << part << "' not in: " << e.what());
    return ok;
  };
}


// A model small enough to work out by hand: hidden 1000; layer 0 dense, layer 1
// MoE (4 experts, top 2); one 1000 x 1000 attention matrix per layer (1 MB),
// a router [4, 1000] (8 kB), an expert of one 100 x 1000 matrix (100 kB), a
// head [10, 1000] (10 kB); no cache attention (no heads).
ModelCost toy() {
  ModelCost c;
  c.n_experts = 4;
  c.top_k = 2;
  c.hidden = 1000;
  c.vocab = 10;
  const MatrixCost attn{"attn", "k/f32", 1000, 1000, 1000000};
  LayerCost l0, l1;
  l0.layer = 0;
  l0.attention = {attn};
  l1.layer = 1;
  l1.moe = true;
  l1.attention = {attn};
  l1.router = {"router", "k/f32", 4, 1000, 8000};
  l1.expert = {{"expert", "k/f32", 100, 1000, 100000}};
  c.layers = {l0, l1};
  c.lm_head = {"head", "k/f32", 10, 1000, 10000};
  return c;
}

// 1 GB/s, 1 GFLOP/s per core at every batch, one core, no dispatch cost.
HostProfile host(int cores = 1) {
  HostProfile h;
  h.name = "toy";
  h.memory_bytes = 1 << 30;
  h.cores = cores;
  h.bandwidth = 1e9;
  h.bandwidth_per_core = 1e9;
  h.vector_flops_per_core = 1e9;
  h.kernels["k/f32"] = {{1, 1e9}};
  return h;
}

ClusterProfile cluster(int ranks, bool apart, double latency = 1e-3) {
  ClusterProfile c;
  for (int r = 0; r < ranks; ++r) c.host_of_rank.push_back(apart ? r : 0);
  c.hosts.assign(apart ? size_t(ranks) : 1, host(apart ? 1 : ranks));
  c.link = {"link", latency, 1e9, {}};
  c.local = {"local", latency, 1e9, {}};
  return c;
}

Layout pipeline2() {
  Layout l;
  l.mode = ParallelMode::pipeline;
  l.ranks = {RankShare{LayerRange{0, 1, true, false}, ExpertRange{0, 4}},
             RankShare{LayerRange{1, 2, false, true}, ExpertRange{0, 4}}};
  return l;
}

// Expert parallel on 2 ranks: every layer on both, experts 0-1 and 2-3.
Layout expert2() {
  Layout l;
  l.mode = ParallelMode::expert;
  l.ranks = {RankShare{LayerRange{0, 2, true, true}, ExpertRange{0, 2}},
             RankShare{LayerRange{0, 2, true, true}, ExpertRange{2, 4}}};
  return l;
}

}  // namespace

BOOST_AUTO_TEST_CASE(one_rank_decode_by_hand) {
  Layout one;
  one.ranks = {RankShare{LayerRange{0, 2, true, true}, ExpertRange{0, 4}}};
  PredictOptions o;
  o.batches = {1, 4};
  o.context = 0;
  const auto p = predict(toy(), one, cluster(1, false), o);
  // Batch 1: attention 2 MFLOP at 1 GFLOP/s (compute over 1 ms of bytes) twice; router 8 us;
  // 4 (1 - 1/2) = 2 experts touched, 1 row each: 0.2 ms each; head 20 us.
  BOOST_TEST(p[0].step_seconds == 2 * 2e-3 + 8e-6 + 2 * 2e-4 + 2e-5, tt::tolerance(1e-9));
  BOOST_TEST(p[0].bound == "compute");
  // Batch 4: attention 8 ms twice; router 32 us; 4 (1 - 1/16) = 3.75 experts of 8/3.75 rows:
  // 3.75 x 0.2 ms x 8/3.75 = 1.6 ms; head 80 us.
  BOOST_TEST(p[1].step_seconds == 16e-3 + 32e-6 + 1.6e-3 + 8e-5, tt::tolerance(1e-9));
  BOOST_TEST(p[1].tokens_per_s == 4 / (16e-3 + 32e-6 + 1.6e-3 + 8e-5), tt::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE(pipeline_two_hosts_by_hand) {
  PredictOptions o;
  o.batches = {1, 4};
  o.context = 0;
  const auto p = predict(toy(), pipeline2(), cluster(2, true), o);
  // Batch 1, one group: the stages in turn, each hop 1 ms + bytes (4000 + 64 activations; 16 + 64 result).
  const double t0 = 2e-3 + 1e-3 + 4064e-9, t1 = 2e-3 + 8e-6 + 4e-4 + 2e-5 + 1e-3 + 80e-9;
  BOOST_TEST(p[0].step_seconds == t0 + t1, tt::tolerance(1e-9));
  BOOST_TEST(p[0].link_seconds == 2e-3 + 4144e-9, tt::tolerance(1e-9));
  // Batch 4, two groups of 2: stage 1 is the slower (4 ms + 16 us + 3 experts x 0.2 ms x 4/3 + 40 us + hop),
  // and two of it outlast one group's trip through both stages.
  const double s0 = 4e-3 + 1e-3 + 8064e-9, s1 = 4e-3 + 16e-6 + 8e-4 + 4e-5 + 1e-3 + 96e-9;
  BOOST_TEST(2 * s1 > s0 + s1);
  BOOST_TEST(p[1].step_seconds == 2 * s1, tt::tolerance(1e-9));
  BOOST_TEST(p[1].group_latency_seconds == 2 * s1, tt::tolerance(1e-9));  // a group waits its turn at stage 1
  BOOST_TEST(p[1].metrics_tokens_per_s == 2 / (2 * s1), tt::tolerance(1e-9));
}

// A split head (--head-split 4): stage 0 multiplies lm_head rows 0-3 (8 kFLOP,
// 8 us at 1 GFLOP/s), stage 1 rows 4-9 (12 us) and sends back the normed row
// and its 6 logit columns: (1000 + 6) x 4 + 64 bytes.
BOOST_AUTO_TEST_CASE(pipeline_with_a_split_head_by_hand) {
  Layout split = pipeline2();
  for (RankShare& r : split.ranks) r.layers.head_split = 4;
  PredictOptions o;
  o.batches = {1};
  o.context = 0;
  const auto p = predict(toy(), split, cluster(2, true), o);
  const double t0 = 2e-3 + 8e-6 + 1e-3 + 4064e-9, t1 = 2e-3 + 8e-6 + 4e-4 + 12e-6 + 1e-3 + 4088e-9;
  BOOST_TEST(p[0].step_seconds == t0 + t1, tt::tolerance(1e-9));
  BOOST_TEST(p[0].link_seconds == 2e-3 + 8152e-9, tt::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE(expert_two_hosts_pays_latency_per_moe_layer) {
  const Layout ex = expert2();
  PredictOptions o;
  o.batches = {2};
  o.context = 0;
  const auto p = predict(toy(), ex, cluster(2, true), o);
  // One sequence per rank. Dense layer 2 ms; MoE: attention + router 2.008 ms, then dispatch:
  // a token reaches the other rank unless both its experts are here, 1 - (2/4)(1/3) = 5/6 of
  // 4000 bytes, plus 2 x 2/4 pairs of 8 bytes and a 16-byte header; the experts: 1.5 touched
  // of 4/3 rows each = 0.4 ms; combine 2 x 2/4 outputs of 4000 bytes + 16; head 20 us; the step
  // out and back 2 ms.
  const double dispatch = 1e-3 + (4000.0 * 5 / 6 + 8 + 16) * 1e-9, combine = 1e-3 + 4016e-9;
  const double step = 2e-3 + 2.008e-3 + dispatch + 4e-4 + combine + 2e-5 + 2e-3;
  BOOST_TEST(p[0].step_seconds == step, tt::tolerance(1e-9));
  BOOST_TEST(p[0].link_seconds == dispatch + combine + 2e-3, tt::tolerance(1e-9));
  BOOST_TEST(p[0].tokens_per_s == 2 / step, tt::tolerance(1e-9));
}

// --micro-batches 2 in expert mode: each rank's two sequences take turns at
// the MoE layer. The toy is compute-bound, so two 1-row passes over the
// attention cost what one 2-row pass does; of each exchange only the last
// group's half is waited for (the first half travels behind the second
// group's 2.008 ms of attention).
BOOST_AUTO_TEST_CASE(expert_groups_hide_all_but_the_last_share_of_each_exchange) {
  const Layout ex = expert2();
  PredictOptions o;
  o.batches = {4};
  o.context = 0;
  o.min_group_rows = 1;  // the engine's 32 would keep the toy's 2 rows a rank in one group
  o.micro_batches = 1;
  const auto one = predict(toy(), ex, cluster(2, true), o);
  o.micro_batches = 2;
  const auto two = predict(toy(), ex, cluster(2, true), o);
  // Shared by both: dense layer 4 ms (4 MFLOP), attention + router 4.016 ms, experts:
  // 4 (1 - 1/16) / 2 = 1.875 touched per rank of 4 / 1.875 rows, 0.8 ms; head 2 rows 40 us;
  // the step out and back 2 ms. Dispatch per token: 5/6 x 4000 bytes + 8; combine 4000.
  const double fixed = 4e-3 + 4.016e-3 + 0.8e-3 + 4e-5 + 2e-3;
  const double per_token_d = 4000.0 * 5 / 6 + 8;
  const double whole = 1e-3 + (2 * per_token_d + 16) * 1e-9 + 1e-3 + 8016e-9;
  const double half = 1e-3 + (per_token_d + 16) * 1e-9 + 1e-3 + 4016e-9;
  BOOST_TEST(one[0].step_seconds == fixed + whole, tt::tolerance(1e-9));
  BOOST_TEST(two[0].step_seconds == fixed + half, tt::tolerance(1e-9));
  // One sequence a rank (batch 2) forms one group: nothing changes.
  o.batches = {2};
  const auto single = predict(toy(), ex, cluster(2, true), o);
  o.micro_batches = 1;
  BOOST_TEST(single[0].step_seconds == predict(toy(), ex, cluster(2, true), o)[0].step_seconds, tt::tolerance(1e-12));
  // The default (0) is 2 groups.
  o.batches = {4};
  o.micro_batches = 0;
  BOOST_TEST(predict(toy(), ex, cluster(2, true), o)[0].step_seconds == two[0].step_seconds, tt::tolerance(1e-12));
  // Nor do groups below min_group_rows: 2 rows a rank, 2 rows a group at least.
  o.batches = {4};
  o.micro_batches = 2;
  o.min_group_rows = 2;
  BOOST_TEST(predict(toy(), ex, cluster(2, true), o)[0].step_seconds == one[0].step_seconds, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(ranks_of_one_host_share_its_bandwidth_when_busy_together) {
  // A memory-bound model: the attention matrix reads 10 MB for 2 MFLOP.
  ModelCost c = toy();
  for (auto& l : c.layers) l.attention[0].bytes = 10000000;
  PredictOptions o;
  o.batches = {1, 2};
  o.context = 0;
  ClusterProfile one = cluster(2, false, 1e-6);
  one.hosts[0].bandwidth = 1e9;          // both cores together: no more than one
  one.hosts[0].bandwidth_per_core = 1e9;
  const auto p = predict(c, pipeline2(), one, o);
  // Batch 1: one group, the stages take turns, each has the whole 1 GB/s: 10 ms per layer.
  BOOST_TEST(p[0].memory_seconds >= 20e-3);
  BOOST_TEST(p[0].memory_seconds < 21e-3);
  // Batch 2: two groups in flight, both stages read at once at 0.5 GB/s: 20 ms per layer each.
  BOOST_TEST(p[1].step_seconds >= 2 * 20e-3);
  BOOST_TEST(p[1].bound == "memory");
}

BOOST_AUTO_TEST_CASE(kernel_rate_interpolates_in_log_batch) {
  HostProfile h = host();
  h.kernels["k/f32"] = {{1, 1e9}, {4, 4e9}};
  BOOST_TEST(h.kernel_rate("k/f32", 2) == 2e9, tt::tolerance(1e-9));
  BOOST_TEST(h.kernel_rate("k/f32", 0.5) == 1e9);
  BOOST_TEST(h.kernel_rate("k/f32", 64) == 4e9);
  BOOST_CHECK_EXCEPTION(h.kernel_rate("fp8/f32", 1), InputError, says("has no rate for kernel fp8/f32"));
}

BOOST_AUTO_TEST_CASE(weight_matrices_use_the_streaming_rates_when_measured) {
  HostProfile h = host();
  h.kernels["k/f32"] = {{1, 4e9}};
  BOOST_TEST(h.weight_rate("k/f32", 1) == 4e9);  // no streaming figure: the in-cache rate
  h.kernels_streaming["k/f32"] = {{1, 1e9}, {4, 2e9}};
  BOOST_TEST(h.weight_rate("k/f32", 1) == 1e9);
  BOOST_TEST(h.weight_rate("k/f32", 2) == std::sqrt(2.0) * 1e9, tt::tolerance(1e-9));
  BOOST_TEST(h.kernel_rate("k/f32", 1) == 4e9);  // the in-cache table is untouched
  // The round trip through JSON keeps both tables; a profile without the
  // streaming table reads as before.
  const HostProfile back = host_profile_from_json(to_json(h), "test");
  BOOST_TEST(back.weight_rate("k/f32", 4) == 2e9);
  nlohmann::json j = to_json(host());
  j.erase("kernels_streaming");
  BOOST_TEST(host_profile_from_json(j, "test").kernels_streaming.empty());
  j["kernels_streaming"] = {{"k/f32", {{"0", 1e9}}}};
  BOOST_CHECK_EXCEPTION(host_profile_from_json(j, "test"), InputError,
                        says("kernels_streaming.k/f32.0 must be a batch >= 1 with a positive FLOP/s"));

  // One rank, batch 1, in-cache 4 GFLOP/s but streaming 1 GFLOP/s: the
  // attention matrices take 2 ms each again (as at 1 GFLOP/s in one_rank_decode_by_hand).
  Layout one;
  one.ranks = {RankShare{LayerRange{0, 2, true, true}, ExpertRange{0, 4}}};
  PredictOptions o;
  o.batches = {1};
  o.context = 0;
  ClusterProfile cl = cluster(1, false);
  cl.hosts[0].kernels["k/f32"] = {{1, 4e9}};
  cl.hosts[0].kernels_streaming["k/f32"] = {{1, 1e9}};
  BOOST_TEST(predict(toy(), one, cl, o)[0].step_seconds == 2 * 2e-3 + 8e-6 + 2 * 2e-4 + 2e-5, tt::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE(emulated_hosts_share_the_machine_cores_by_pinning) {
  // Four emulated hosts on a 2-core machine in expert mode: host i pinned to
  // core i mod 2, so two busy ranks share each core and every second of work
  // takes two; links between the hosts as between machines.
  Layout ex;
  ex.mode = ParallelMode::expert;
  for (int r = 0; r < 4; ++r) ex.ranks.push_back(RankShare{LayerRange{0, 2, true, true}, ExpertRange{r, r + 1}});
  PredictOptions o;
  o.batches = {4};
  o.context = 0;
  ClusterProfile apart = cluster(4, true, 1e-6);  // four real 1-core hosts
  ClusterProfile emulated = apart;
  emulated.one_machine = true;
  emulated.hosts[0].cores = 2;
  emulated.hosts[0].bandwidth = 2e9;  // 1 GB/s per core, as each real host
  const auto a = predict(toy(), ex, apart, o)[0], e = predict(toy(), ex, emulated, o)[0];
  BOOST_TEST(a.link_seconds == e.link_seconds, tt::tolerance(1e-12));
  BOOST_TEST(e.compute_seconds + e.memory_seconds == 2 * (a.compute_seconds + a.memory_seconds),
             tt::tolerance(1e-9));
  // Two emulated hosts on 2 cores: one core each, as two real hosts.
  Layout ex2;
  ex2.mode = ParallelMode::expert;
  ex2.ranks = {RankShare{LayerRange{0, 2, true, true}, ExpertRange{0, 2}},
               RankShare{LayerRange{0, 2, true, true}, ExpertRange{2, 4}}};
  ClusterProfile apart2 = cluster(2, true, 1e-6), emulated2 = apart2;
  emulated2.one_machine = true;
  emulated2.hosts[0].cores = 2;
  emulated2.hosts[0].bandwidth = 2e9;
  BOOST_TEST(predict(toy(), ex2, emulated2, o)[0].step_seconds == predict(toy(), ex2, apart2, o)[0].step_seconds,
             tt::tolerance(1e-12));
}

// Where a machine's ranks outnumber its cores, a wait sleeps once it has
// lasted kWakeAfterSeconds and notices its message wake_seconds late: a hop
// pays that when its receiver has waited longer, and only then.
BOOST_AUTO_TEST_CASE(a_hop_to_a_sleeping_wait_pays_the_wake) {
  BOOST_TEST(kWakeAfterSeconds == std::chrono::duration<double>(Backoff::kYieldFor).count());
  PredictOptions o;
  o.batches = {1};
  o.context = 0;
  ClusterProfile one_core = cluster(2, true);
  one_core.one_machine = true;  // two emulated hosts on a 1-core machine
  one_core.hosts[0].cores = 1;
  const double base = predict(toy(), pipeline2(), one_core, o)[0].step_seconds;
  // Batch 1, one group: stage 1 waits out stage 0's 2 ms, stage 0 stage 1's
  // 2.428 ms, both past 1 ms: two wakes of 0.5 ms.
  one_core.hosts[0].wake_seconds = 5e-4;
  BOOST_TEST(predict(toy(), pipeline2(), one_core, o)[0].step_seconds == base + 1e-3, tt::tolerance(1e-9));
  // A core for each rank: waits never sleep.
  ClusterProfile two_cores = one_core;
  two_cores.hosts[0].cores = 2;
  BOOST_TEST(predict(toy(), pipeline2(), two_cores, o)[0].step_seconds ==
                 predict(toy(), pipeline2(), cluster(2, true), o)[0].step_seconds,
             tt::tolerance(1e-12));
  // Expert mode at batch 1: rank 1 has no rows and waits out rank 0's
  // attention (2.008 ms of work at half the core) for the MoE layer's
  // dispatch: one wake. At batch 2 both ranks reach it together: none.
  ClusterProfile no_wake = one_core;
  no_wake.hosts[0].wake_seconds = 0;
  BOOST_TEST(predict(toy(), expert2(), one_core, o)[0].step_seconds ==
                 predict(toy(), expert2(), no_wake, o)[0].step_seconds + 5e-4,
             tt::tolerance(1e-9));
  o.batches = {2};
  BOOST_TEST(predict(toy(), expert2(), one_core, o)[0].step_seconds ==
                 predict(toy(), expert2(), no_wake, o)[0].step_seconds,
             tt::tolerance(1e-12));
}

// --stages auto by hand: 4 MoE layers, each an attention matrix of 1 MB and
// 64 experts of 1 MB (top 1), and a 5 MB head; memory-bound at 1 GB/s (the
// kernels at 1e15 FLOP/s), so a matrix costs 1 ms per MB read.
BOOST_AUTO_TEST_CASE(time_balanced_stages_by_hand) {
  ModelCost c;
  c.n_experts = 64;
  c.top_k = 1;
  c.hidden = 1000;
  c.vocab = 5000;
  for (int64_t l = 0; l < 4; ++l) {
    LayerCost L;
    L.layer = l;
    L.moe = true;
    L.attention = {{"attn", "k/f32", 1000, 250, 1000000}};
    L.expert = {{"expert", "k/f32", 1000, 250, 1000000}};
    c.layers.push_back(L);
  }
  c.lm_head = {"head", "k/f32", 5000, 250, 5000000};
  HostProfile h = host();
  h.kernels["k/f32"] = {{1, 1e15}};
  // One row: a layer reads its attention and one expert (2 ms), the head 5 ms,
  // 1 ms per 1000 of its rows. Whole layers: 0|1-3+head 2 vs 11, 0-1|2-3+head
  // 4 vs 9, 0-2|3+head 6 vs 7: the last. (By bytes, 65 MB a layer, it would be
  // 0-1|2-3: 130 vs 135 MB against 195 vs 70.) With the head's rows split in
  // steps of 128: 0-2 + rows [0, s) against 3 + rows [s, 5000) balance at
  // s = 500; 512 gives 6.512 vs 6.488 ms, 384 gives 6.384 vs 6.616. The best
  // 0-1|2-3 split, 2560 rows, gives 6.56 vs 6.44: 0-2,3-3 at 512 wins.
  StagePlan p = time_balanced_stages(c, h, 1, 2, 1, 0);
  BOOST_TEST(p.stages == "0-2,3-3");
  BOOST_TEST(p.head_split == 512);
  // One rank: no split; none when not asked for (one group in flight).
  BOOST_TEST(time_balanced_stages(c, h, 1, 1, 1, 0).head_split == 0);
  p = time_balanced_stages(c, h, 1, 2, 1, 0, false);
  BOOST_TEST(p.stages == "0-2,3-3");
  BOOST_TEST(p.head_split == 0);
  BOOST_TEST(auto_stages(c, h, 1, 2, 1, 0, 64).head_split == 0);   // --max-batch 1: one group
  BOOST_TEST(auto_stages(c, h, 1, 2, 2, 0, 64).head_split == 512);  // two groups of a row
  // 64 rows touch 64 (1 - (63/64)^64) = 40.639 experts: a layer 41.639 ms,
  // the head still 5 ms. 0-1|2-3 (83.28 vs 88.28 with the head) balances at
  // s = 2500: 2560 gives 85.838 vs 85.718, 2432 gives 85.710 vs 85.846.
  p = time_balanced_stages(c, h, 1, 2, 64, 0);
  BOOST_TEST(p.stages == "0-1,2-3");
  BOOST_TEST(p.head_split == 2560);
  // Four ranks, one layer each (2 ms): the first and last stage share the
  // head, max(2 + s/1000, 7 - s/1000): 2560 gives 4.56 vs 4.44, 2432 4.432 vs 4.568.
  p = time_balanced_stages(c, h, 1, 4, 1, 0);
  BOOST_TEST(p.stages == "0-0,1-1,2-2,3-3");
  BOOST_TEST(p.head_split == 2560);
}
