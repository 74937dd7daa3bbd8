#define BOOST_TEST_MODULE model_cost
#include <boost/test/unit_test.hpp>

#include <random>

#include "common/error.hpp"
#include "config/model_config.hpp"
#include "plan/config_manifest.hpp"
#include "plan/layout.hpp"
#include "plan/model_cost.hpp"

using namespace trillion;

namespace {

ModelConfig real(const char* name) { return ModelConfig::from_file(std::string(TRILLION_PROFILES) + "/models/" + name); }

// A predicate for BOOST_CHECK_EXCEPTION: the error's message holds `part`.
auto says(std::string part) {
  return [part](const std::exception& e) {
    const bool ok = std::string(e.what()).find(part) != std::string::npos;
    if (!ok) BOOST_TEST_MESSAGE("'" << part << "' not in: " << e.what());
    return ok;
  };
}

}  // namespace

// Every figure below is worked out by hand from the config (shapes x bytes
// per element, FP8 scales one float per 128 x 128 block, INT4 packed nibbles
// plus a bf16 scale per 32 columns), not from the code under test.
BOOST_AUTO_TEST_CASE(deepseek_v3_fp8_bytes_per_token) {
  const ModelConfig cfg = real("deepseek-v3.json");
  const Manifest man = manifest_from_config(cfg);
  const ModelCost c = model_cost(cfg, man, Activations::f32);
  // Attention: q_a [1536,7168] + 12x56 scales, q_b [24576,1536] + 192x12, kv_a [576,7168] + 5x56,
  // kv_b [32768,512] + 256x4, o [7168,16384] + 56x128.
  const int64_t attn = (11010048 + 2688) + (37748736 + 9216) + (4128768 + 1120) + (16777216 + 4096) + (117440512 + 28672);
  BOOST_TEST(attn == 187151072);
  const int64_t norms = (7168 + 7168 + 1536 + 512) * 2;
  const int64_t dense_mlp = 3 * (132120576 + 144 * 56 * 4);       // [18432,7168] x3
  const int64_t expert = 3 * (14680064 + 16 * 56 * 4);             // [2048,7168] x3, shared alike
  const int64_t router = 256 * 7168 * 2, bias = 256 * 4;
  BOOST_TEST(c.layers[0].dense_bytes() == attn + norms + dense_mlp);
  BOOST_TEST(c.layers[3].expert_bytes() == expert);
  BOOST_TEST(c.layers[3].dense_bytes() == attn + norms + router + bias + expert);
  const int64_t lm_head = int64_t(129280) * 7168 * 2, embed_row = 7168 * 2;
  const int64_t total = 3 * (attn + norms + dense_mlp) + 58 * (attn + norms + router + bias + 9 * expert) + lm_head + embed_row;
  BOOST_TEST(total == int64_t(37668475232));
  BOOST_TEST(c.bytes_per_token() == total);
  BOOST_TEST(c.layers[5].attention[0].kernel == "fp8/f32");
  BOOST_TEST(c.lm_head.kernel == "bf16/f32");
  // The int8 path reads the int8 copy (1 byte + a bf16 per 32 columns), kv_b_proj excepted.
  const ModelCost q = model_cost(cfg, man, Activations::int8);
  BOOST_TEST(q.layers[5].expert[0].bytes == 2048 * 7168 + 2048 * 224 * 2);
  BOOST_TEST(q.layers[5].expert[0].kernel == "int8/int8");
  BOOST_TEST(q.layers[5].attention[3].kernel == "fp8/f32");  // kv_b_proj
  // DeepSeek's BF16 lm_head is quantized with the linears (store/int8_source.hpp).
  BOOST_TEST(q.lm_head.kernel == "int8/int8");
  BOOST_TEST(q.lm_head.bytes == int64_t(129280) * 7168 + int64_t(129280) * 224 * 2);
  // The bf16 path reads the FP8 bytes in place (no copy): the f32 path's bytes,
  // FP8 linears on "fp8/bf16" (kv_b_proj excepted), the BF16 lm_head on f32.
  const ModelCost b = model_cost(cfg, man, Activations::bf16);
  BOOST_TEST(b.bytes_per_token() == total);
  BOOST_TEST(b.layers[5].expert[0].kernel == "fp8/bf16");
  BOOST_TEST(b.layers[5].attention[0].kernel == "fp8/bf16");
  BOOST_TEST(b.layers[5].attention[3].kernel == "fp8/f32");  // kv_b_proj
  BOOST_TEST(b.layers[5].router.kernel == "bf16/f32");
  BOOST_TEST(b.lm_head.kernel == "bf16/f32");
}

BOOST_AUTO_TEST_CASE(kimi_k2_thinking_int4_bytes_per_token) {
  const ModelConfig cfg = real("kimi-k2-thinking.json");
  BOOST_TEST((cfg.weight_format == WeightFormat::int4_group));
  const ModelCost c = model_cost(cfg, manifest_from_config(cfg), Activations::int8);
  // BF16 attention (64 heads): q_a [1536,7168], q_b [12288,1536], kv_a [576,7168], kv_b [16384,512], o [7168,8192].
  const int64_t attn = 2 * (int64_t(1536) * 7168 + 12288 * 1536 + 576 * 7168 + 16384 * 512 + 7168 * 8192);
  BOOST_TEST(attn == 202244096);
  const int64_t norms = (7168 + 7168 + 1536 + 512) * 2;
  const int64_t dense_mlp = 3 * int64_t(18432) * 7168 * 2;
  const int64_t shared = 3 * int64_t(2048) * 7168 * 2;
  // INT4 expert: gate/up packed [2048, 896] int32 + scales [2048, 224] bf16; down [7168, 256] + [7168, 64].
  const int64_t expert = 2 * (2048 * 896 * 4 + 2048 * 224 * 2) + (7168 * 256 * 4 + 7168 * 64 * 2);
  BOOST_TEST(expert == 24772608);
  BOOST_TEST(c.layers[1].expert_bytes() == expert);
  BOOST_TEST(c.layers[1].expert[0].kernel == "int4/int8");
  BOOST_TEST(c.layers[1].attention[0].kernel == "bf16/f32");
  const int64_t router = 384 * 7168 * 2, bias = 384 * 4;
  const int64_t lm_head = int64_t(163840) * 7168 * 2;
  const int64_t total =
      (attn + norms + dense_mlp) + 60 * (attn + norms + router + bias + shared + 8 * expert) + lm_head + 7168 * 2;
  BOOST_TEST(c.bytes_per_token() == total);
}

BOOST_AUTO_TEST_CASE(config_manifest_matches_the_checkpoint_sizes) {
  const ModelConfig cfg = real("deepseek-v3.json");
  const Manifest man = manifest_from_config(cfg);
  // Whole main model in FP8: embedding + 3 dense + 58 MoE layers (256 routed + 1 shared) + norm + lm_head.
  const int64_t attn = 187151072, norms = 32768, expert = 44050944;
  const int64_t total = int64_t(129280) * 7168 * 2 + 3 * (attn + norms + 396458496) +
                        58 * (attn + norms + 256 * 7168 * 2 + 1024 + 257 * expert) + 7168 * 2 + int64_t(129280) * 7168 * 2;
  const ModelSizes s = model_sizes(cfg, man);
  int64_t sum = s.embed + s.head;
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) sum += s.layer_total(l);
  BOOST_TEST(sum == total);  // ~ 671B parameters in ~ 680 GB
  // Four pipeline stages hold all of it between them, each its own files.
  const Layout lay = make_layout(cfg, s, ParallelMode::pipeline, 4);
  int64_t held = 0;
  for (const auto& r : lay.ranks) held += share_bytes(cfg, man, r);
  BOOST_TEST(held == total);
  BOOST_TEST(man.find_shard("layer-003-experts-224-255.h5") != nullptr);
  // A split head (--head-split): the first stage holds lm_head rows [0, 40000)
  // (not the final norm), the last the other 89280; together the same bytes.
  const int64_t head_rows_bytes = int64_t(7168) * 2;  // one BF16 lm_head row
  const Layout split = make_layout(cfg, s, ParallelMode::pipeline, 4, "", 40000);
  BOOST_TEST(share_bytes(cfg, man, split.ranks[0]) == share_bytes(cfg, man, lay.ranks[0]) + 40000 * head_rows_bytes);
  BOOST_TEST(share_bytes(cfg, man, split.ranks[3]) == share_bytes(cfg, man, lay.ranks[3]) - 40000 * head_rows_bytes);
  BOOST_TEST(holds_tensor(cfg, split.ranks[0], "lm_head.weight"));
  BOOST_TEST(!holds_tensor(cfg, split.ranks[0], "model.norm.weight"));
  BOOST_TEST(!holds_tensor(cfg, split.ranks[1], "lm_head.weight"));
  BOOST_TEST(split.ranks[1].layers.head_split == 0);
  BOOST_TEST(split.ranks[3].layers.head_begin() == 40000);
  BOOST_CHECK_THROW(make_layout(cfg, s, ParallelMode::expert, 4, "", 40000), InputError);
  BOOST_CHECK_THROW(make_layout(cfg, s, ParallelMode::pipeline, 1, "", 40000), InputError);
  BOOST_CHECK_THROW(make_layout(cfg, s, ParallelMode::pipeline, 4, "", 129280), InputError);
  // Expert mode: every rank holds the dense part and a quarter of the routed experts.
  const Layout ex = make_layout(cfg, s, ParallelMode::expert, 4);
  const int64_t dense_all = total - 58 * 256 * expert;
  BOOST_TEST(share_bytes(cfg, man, ex.ranks[0]) == dense_all + 58 * 64 * expert);
}

BOOST_AUTO_TEST_CASE(quantize_makes_every_linear_that_format) {
  ModelConfig cfg = real("kimi-k2-instruct.json");  // FP8: --quantize int8 only
  BOOST_CHECK_EXCEPTION(quantized_config(cfg, WeightFormat::int4_group), InputError,
                        says("--quantize int4: an fp8 checkpoint is quantized to int8 only"));
  const ModelConfig from_fp8 = quantized_config(cfg, WeightFormat::int8_group);
  BOOST_TEST((from_fp8.requantized_from == WeightFormat::fp8_block));
  BOOST_TEST(model_cost(from_fp8, manifest_from_config(from_fp8), Activations::int8).lm_head.kernel == "int8/int8");
  cfg.weight_format = WeightFormat::bf16;
  const ModelConfig q = quantized_config(cfg, WeightFormat::int8_group);
  const ModelCost c = model_cost(q, manifest_from_config(q), Activations::int8);
  BOOST_TEST(c.lm_head.kernel == "int8/int8");
  BOOST_TEST(c.lm_head.bytes == int64_t(163840) * 7168 + int64_t(163840) * 224 * 2);
}

BOOST_AUTO_TEST_CASE(experts_touched_by_hand) {
  BOOST_TEST(expected_experts_touched(256, 8, 1) == 8.0, boost::test_tools::tolerance(1e-12));
  // 256 (1 - (31/32)^2) = 256 x 63/1024
  BOOST_TEST(expected_experts_touched(256, 8, 2) == 15.75, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(expected_experts_touched(64, 8, 1000) == 64.0, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(expected_experts_touched(64, 8, 0) == 0.0);
}

// The claim that group-limited routing keeps the mean: sample DeepSeek-V3's
// routing (8 groups of 32, best 4 groups by their top-2 sum, top 8 of those)
// under i.i.d. scores and count distinct experts over a batch.
BOOST_AUTO_TEST_CASE(group_limited_routing_keeps_the_mean) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  const int E = 256, G = 8, per = 32, keep = 4, k = 8;
  for (int B : {4, 32}) {
    double sum = 0;
    const int trials = 200;
    for (int t = 0; t < trials; ++t) {
      std::vector<bool> hit(E, false);
      for (int b = 0; b < B; ++b) {
        std::vector<double> s(E);
        for (auto& v : s) v = u(rng);
        std::vector<std::pair<double, int>> groups;
        for (int g = 0; g < G; ++g) {
          std::vector<double> m(s.begin() + g * per, s.begin() + (g + 1) * per);
          std::partial_sort(m.begin(), m.begin() + 2, m.end(), std::greater<>());
          groups.push_back({m[0] + m[1], g});
        }
        std::sort(groups.begin(), groups.end(), std::greater<>());
        std::vector<std::pair<double, int>> cand;
        for (int i = 0; i < keep; ++i)
          for (int e = 0; e < per; ++e) cand.push_back({s[size_t(groups[size_t(i)].second * per + e)], groups[size_t(i)].second * per + e});
        std::partial_sort(cand.begin(), cand.begin() + k, cand.end(), std::greater<>());
        for (int i = 0; i < k; ++i) hit[size_t(cand[size_t(i)].second)] = true;
      }
      sum += double(std::count(hit.begin(), hit.end(), true));
    }
    BOOST_TEST(sum / trials == expected_experts_touched(E, k, B), boost::test_tools::tolerance(0.03));
  }
}
