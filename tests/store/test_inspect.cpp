// inspect: parameter counts by an independent formula, bytes per dtype and
// role, the text and JSON summaries, and verify on an intact model.
#define BOOST_TEST_MODULE inspect
#include <boost/test/unit_test.hpp>

#include <sstream>

#include <nlohmann/json.hpp>

#include "store/converter.hpp"
#include "store/inspect.hpp"
#include "synthetic_hf.hpp"

using namespace trillion;
using namespace trillion::test;

BOOST_AUTO_TEST_CASE(tiny_model_summary) {
  TempDir tmp;
  write_synthetic_checkpoint(tmp / "hf", tiny_config("int4", 1), {.mtp = true});
  convert_checkpoint(ConvertOptions{tmp / "hf", tmp / "model", 4, false, nullptr});
  const ModelSummary s = summarize_model(tmp / "model");

  // tiny_config: V 64, d 64, dense width 96, expert width 32, 3 layers (1 dense),
  // 2 heads, q_lora 48, kv_lora 32, nope 16, rope 8, v 16, 10 experts top 2, 1 shared.
  const int64_t d = 64, V = 64, I = 96, m = 32, H = 2;
  const int64_t attn = 2 * d + 48 * d + 48 + H * 24 * 48 + (32 + 8) * d + 32 + H * 32 * 32 + d * H * 16;
  const int64_t dense = 3 * I * d, moe_fixed = 10 * d + 10 + 3 * m * d, expert = 3 * m * d;
  const int64_t embed = V * d, head = d + V * d;
  const int64_t total = embed + head + 3 * attn + dense + 2 * (moe_fixed + 10 * expert);
  const int64_t active = head + 3 * attn + dense + 2 * (moe_fixed + 2 * expert);
  BOOST_TEST(s.params.total == total);
  BOOST_TEST(s.params.active == active);
  // MTP (synthetic_hf): enorm, hnorm, eh_proj, input_layernorm, gate, two expert matrices.
  BOOST_TEST(s.params.mtp == d + d + 2 * d * d + d + 10 * d + 2 * m * d);

  // int4: routed experts are packed int32 + bf16 scales; everything else bf16 (bias f32).
  BOOST_TEST(s.bytes_by_dtype.at("I32") == uint64_t(2 * 10 * expert / 2));  // 4 bits per weight
  BOOST_TEST(s.bytes_by_dtype.at("F32") == uint64_t(2 * 10 * 4));
  BOOST_TEST(s.bytes_by_role.count("experts"));
  BOOST_TEST(s.bytes_by_role.count("mtp_experts"));
  for (const auto& p : s.shard_problems) BOOST_TEST(p.empty());

  std::ostringstream text;
  print_summary(text, s);
  for (const char* part : {"kimi_k2", "int4", "active per token", "layer-001-experts-008-009.h5", "embed.h5",
                           "not the embedding table"})
    BOOST_TEST(text.str().find(part) != std::string::npos, part << " not in:\n" << text.str());

  const nlohmann::json j = summary_json(s);
  BOOST_TEST(j["parameters"]["total"].get<int64_t>() == total);
  BOOST_TEST(j["shards"].size() == s.store->manifest().shards().size());
  BOOST_TEST(j["weight_format"] == "int4");

  const VerifyReport r = verify_model(*s.store, nullptr);
  BOOST_TEST(r.ok());
  BOOST_TEST(r.tensors == int64_t(s.store->manifest().tensors().size()));
  std::ostringstream vt;
  print_verify(vt, r);
  BOOST_TEST(vt.str().find("OK") != std::string::npos);
  BOOST_TEST(verify_json(r)["ok"] == true);
}
