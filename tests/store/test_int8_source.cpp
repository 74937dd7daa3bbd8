// FP8 weights on the integer-dot path: requantize_fp8_to_int8 against a
// hand-computed case, and Int8FromFp8Source's view of a source.
#define BOOST_TEST_MODULE int8_source
#include <boost/test/unit_test.hpp>

#include <cstring>

#include "common/numeric.hpp"
#include "common/error.hpp"
#include "expect_error.hpp"
#include "model/memory_source.hpp"
#include "store/int8_source.hpp"

using namespace trillion;

namespace {

uint8_t e4m3_code(float v) {  // the exact code of a representable value
  for (int c = 0; c < 256; ++c)
    if (fp8e4m3_to_f32(uint8_t(c)) == v) return uint8_t(c);
  BOOST_FAIL("not an e4m3 value");
  return 0;
}

}  // namespace

// One row of 34 columns (two groups, the second partial) in one 128-block
// with scale 0.5: values v * 0.5.
BOOST_AUTO_TEST_CASE(requantizes_the_exact_fp8_values_by_the_int8_rule) {
  std::vector<float> v(34, 0.0f);
  v[0] = 448.0f;  // group 0 absmax: 224 after the scale
  v[1] = -1.0f;   // -0.5
  v[2] = 0.875f;  // 0.4375
  v[32] = 3.0f;   // group 1: absmax 2.5 (v 5), one value 1.5
  v[33] = -5.0f;
  std::vector<uint8_t> codes;
  for (float x : v) codes.push_back(e4m3_code(x));
  const float scale = 0.5f;
  QuantizedMatrix q = requantize_fp8_to_int8("m", codes.data(), &scale, 1, 34, nullptr);
  BOOST_REQUIRE_EQUAL(q.tensors.size(), 2u);
  BOOST_TEST(q.tensors[0].name == "m.weight");
  BOOST_TEST(q.tensors[1].name == "m.weight_scale");
  const int8_t* qi = reinterpret_cast<const int8_t*>(q.tensors[0].data.data());
  const uint16_t* s = reinterpret_cast<const uint16_t*>(q.tensors[1].data.data());
  // Group 0: 224 / 127 = 1.7637..; the smallest bf16 >= it is 1.765625 (0x3fe2).
  BOOST_TEST(s[0] == 0x3fe2);
  BOOST_TEST(qi[0] == 127);  // 224 / 1.765625 = 126.87 -> 127
  BOOST_TEST(qi[1] == 0);    // -0.5 / 1.765625 = -0.28 -> 0
  BOOST_TEST(qi[2] == 0);
  // Group 1: 2.5 / 127 = 0.019685..; bf16 ceiling 0.019775390625 (0x3ca2).
  BOOST_TEST(s[1] == 0x3ca2);
  BOOST_TEST(qi[32] == 76);   // 1.5 / 0.019775 = 75.85 -> 76
  BOOST_TEST(qi[33] == -126);  // -2.5 / 0.019775 = -126.42 -> -126
  BOOST_TEST(q.stats.max_abs_err > 0.0);
  BOOST_TEST(q.stats.max_abs_err < 0.5 * 1.765625 + 1e-12);  // half a step at most
}

BOOST_AUTO_TEST_CASE(source_shows_fp8_linears_as_int8_and_keeps_kv_b) {
  // The checkpoint's own names (format/hf_tensors.hpp): kv_b is known by its place in the table.
  MemoryTensorSource inner;
  std::vector<uint8_t> codes(4 * 40, e4m3_code(1.5f));
  const float one = 1.0f;
  for (const char* p : {"model.layers.0.mlp.up_proj", "model.layers.0.self_attn.kv_b_proj"}) {
    inner.add(std::string(p) + ".weight", DType::F8_E4M3, {4, 40}, codes.data());
    inner.add(std::string(p) + ".weight_scale_inv", DType::F32, {1, 1}, &one);
  }
  const uint16_t bf = 0x3f80;  // a bf16 router weight: untouched
  inner.add("model.layers.0.mlp.gate.weight", DType::BF16, {1, 1}, &bf);
  Int8FromFp8Source src(inner, nullptr);
  BOOST_TEST(src.has("model.layers.0.mlp.up_proj.weight_scale"));
  BOOST_TEST(!src.has("model.layers.0.mlp.up_proj.weight_scale_inv"));
  const TensorView w = src.tensor("model.layers.0.mlp.up_proj.weight");
  BOOST_TEST(int(w.dtype) == int(DType::I8));
  BOOST_TEST((w.shape == std::vector<int64_t>{4, 40}));
  const TensorView s = src.tensor("model.layers.0.mlp.up_proj.weight_scale");
  BOOST_TEST(int(s.dtype) == int(DType::BF16));
  BOOST_TEST((s.shape == std::vector<int64_t>{4, 2}));
  BOOST_TEST(w.as<int8_t>()[0] == 127);  // every value 1.5: q = 127 at scale bf16_ceil(1.5/127)
  BOOST_TEST(w.data == src.tensor("model.layers.0.mlp.up_proj.weight").data);  // requantized once
  // kv_b (the absorbed attention's exact W_UK/W_UV) and non-FP8 tensors pass through.
  BOOST_TEST(int(src.tensor("model.layers.0.self_attn.kv_b_proj.weight").dtype) == int(DType::F8_E4M3));
  BOOST_TEST(src.has("model.layers.0.self_attn.kv_b_proj.weight_scale_inv"));
  BOOST_TEST(!src.has("model.layers.0.self_attn.kv_b_proj.weight_scale"));
  BOOST_TEST(int(src.tensor("model.layers.0.mlp.gate.weight").dtype) == int(DType::BF16));
  BOOST_TEST(src.stats().matrices == 1);
}

// DeepSeek's BF16 lm_head becomes int8 groups by convert --quantize int8's
// rule; by hand: a row of 40 values 3.0 has absmax 3, s = the smallest bf16
// >= 3/127 (0x3cc2 = 0.023681640625: m = 0.7559.. -> ceil(m 2^8) = 194, 2^-5 * 194/256),
// q = rint(3 / s) = 127 (126.68); the 8 columns of the second group, 1.0:
// s = smallest bf16 >= 1/127 = 0x3c02 (0.0079345703125), q = rint(126.03) = 126.
BOOST_AUTO_TEST_CASE(source_quantizes_a_bf16_lm_head) {
  MemoryTensorSource inner;
  std::vector<uint16_t> head(2 * 40, 0x4040);  // 3.0
  for (int c = 32; c < 40; ++c) head[size_t(c)] = 0x3f80;  // row 0, second group: 1.0
  inner.add("lm_head.weight", DType::BF16, {2, 40}, head.data());
  Int8FromFp8Source src(inner, nullptr);
  BOOST_TEST(src.has("lm_head.weight_scale"));
  const TensorView w = src.tensor("lm_head.weight");
  BOOST_TEST(int(w.dtype) == int(DType::I8));
  const TensorView s = src.tensor("lm_head.weight_scale");
  BOOST_TEST((s.shape == std::vector<int64_t>{2, 2}));
  BOOST_TEST(s.as<uint16_t>()[0] == 0x3cc2);
  BOOST_TEST(w.as<int8_t>()[0] == 127);
  BOOST_TEST(s.as<uint16_t>()[1] == 0x3c02);
  BOOST_TEST(w.as<int8_t>()[32] == 126);
  MemoryTensorSource f32;
  const std::vector<float> head32(2 * 40, 3.0f);
  f32.add("lm_head.weight", DType::F32, {2, 40}, head32.data());
  Int8FromFp8Source other(f32, nullptr);
  trillion::test::expect_error<trillion::FormatError>([&] { other.tensor("lm_head.weight"); }, {"lm_head.weight", "BF16", "--activations f32"});
}
