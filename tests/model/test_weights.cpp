// Loading weights by HF name: formats become the right QMatrix; a missing
// tensor, a wrong dtype or shape is a FormatError naming the tensor.
#include <boost/test/unit_test.hpp>

#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "model/weights.hpp"
#include "random_model.hpp"

using namespace trillion;

namespace {

// Runs fn and checks it throws FormatError whose message contains `needle`.
template <class Fn>
void expect_format_error(Fn&& fn, const std::string& needle) {
  try {
    fn();
    BOOST_ERROR("no FormatError (expected one mentioning '" << needle << "')");
  } catch (const FormatError& e) {
    BOOST_TEST(std::string(e.what()).find(needle) != std::string::npos, "message: " << e.what());
  }
}

// A copy of `src` with tensor `name` replaced (or removed when dtype is absent).
MemoryTensorSource with_tensor(MemoryTensorSource& src, const std::string& name, std::optional<DType> dtype = {},
                               std::vector<int64_t> shape = {}) {
  MemoryTensorSource out;
  for (const std::string& n : src.names()) {
    if (n == name) continue;
    const TensorView t = src.tensor(n);
    out.add(n, t.dtype, t.shape, t.data);
  }
  if (dtype) {
    size_t bytes = dtype_size(*dtype);
    for (int64_t s : shape) bytes *= size_t(s);
    std::vector<std::byte> zeros(bytes);
    out.add(name, *dtype, shape, zeros.data());
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(formats_map_to_qmatrix) {
  for (const char* format : {"bf16", "fp8", "int4"}) {
    BOOST_TEST_CONTEXT(format) {
      const ModelConfig cfg = test::tiny_config({.format = format, .hidden = 160});
      MemoryTensorSource src;
      test::fill_random_model(cfg, src, 1);
      const ModelWeights w = ModelWeights::load(cfg, LayerRange{0, 3, true, true}, src);
      BOOST_TEST(w.layers.size() == 3u);
      BOOST_TEST(!w.layers[0].is_moe);
      BOOST_TEST(w.layers[1].is_moe);
      const QMatrix& kv_b = w.layers[1].attn.kv_b;
      BOOST_TEST(kv_b.rows == 4 * (16 + 16));
      BOOST_TEST(kv_b.cols == 32);
      const MlpWeights e = load_expert(cfg, src, 2, 15);
      BOOST_TEST(e.down.rows == 160);
      BOOST_TEST(e.down.cols == 32);
      const std::string f = format;
      BOOST_TEST((w.embed.format == MatFormat::BF16));
      BOOST_TEST((w.layers[1].moe.gate.format == MatFormat::BF16));
      if (f == "bf16") BOOST_TEST((kv_b.format == MatFormat::BF16 && e.gate.format == MatFormat::BF16));
      if (f == "fp8") {
        BOOST_TEST((kv_b.format == MatFormat::FP8_B128 && e.gate.format == MatFormat::FP8_B128));
        BOOST_TEST(e.gate.scale_cols == 2);  // 160 columns: 2 blocks, the last partial
      }
      if (f == "int4") {
        BOOST_TEST((kv_b.format == MatFormat::BF16 && e.gate.format == MatFormat::INT4_G32));
        BOOST_TEST(e.gate.scale_cols == 5);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(partial_ranges_load_only_their_part) {
  const ModelConfig cfg = test::tiny_config();
  MemoryTensorSource src;
  test::fill_random_model(cfg, src, 2);
  // A middle stage needs neither embeddings nor head: remove them.
  MemoryTensorSource mid = with_tensor(src, "model.embed_tokens.weight");
  mid = with_tensor(mid, "lm_head.weight");
  const ModelWeights w = ModelWeights::load(cfg, LayerRange{1, 2, false, false}, mid);
  BOOST_TEST(w.layers.size() == 1u);
  BOOST_TEST(w.layers[0].layer == 1);
  expect_format_error([&] { ModelWeights::load(cfg, LayerRange{0, 1, true, false}, mid); }, "model.embed_tokens.weight");
  BOOST_CHECK_THROW(ModelWeights::load(cfg, LayerRange{0, 4, true, true}, src), ConfigError);
}

BOOST_AUTO_TEST_CASE(bad_tensors_are_named) {
  const ModelConfig cfg = test::tiny_config({.format = "fp8"});
  MemoryTensorSource src;
  test::fill_random_model(cfg, src, 3);
  const LayerRange all{0, 3, true, true};
  const std::string p = "model.layers.1.self_attn.";
  {
    MemoryTensorSource s = with_tensor(src, p + "o_proj.weight");
    expect_format_error([&] { ModelWeights::load(cfg, all, s); }, p + "o_proj.weight");
  }
  {
    MemoryTensorSource s = with_tensor(src, p + "kv_b_proj.weight_scale_inv");
    expect_format_error([&] { ModelWeights::load(cfg, all, s); }, p + "kv_b_proj.weight_scale_inv");
  }
  {
    MemoryTensorSource s = with_tensor(src, p + "kv_b_proj.weight", DType::F8_E4M3, {128, 31});
    expect_format_error([&] { ModelWeights::load(cfg, all, s); }, p + "kv_b_proj.weight: shape [128, 31], expected [128, 32]");
  }
  {
    MemoryTensorSource s = with_tensor(src, p + "kv_a_layernorm.weight", DType::I32, {32});
    expect_format_error([&] { ModelWeights::load(cfg, all, s); }, p + "kv_a_layernorm.weight: dtype I32");
  }
  {
    MemoryTensorSource s = with_tensor(src, p + "kv_b_proj.weight_scale_inv", DType::F32, {2, 1});
    expect_format_error([&] { ModelWeights::load(cfg, all, s); }, "weight_scale_inv: shape [2, 1], expected [1, 1]");
  }
}

BOOST_AUTO_TEST_CASE(bad_int4_tensors_are_named) {
  const ModelConfig cfg = test::tiny_config({.format = "int4"});
  MemoryTensorSource src;
  test::fill_random_model(cfg, src, 4);
  const std::string e = "model.layers.2.mlp.experts.3.down_proj";
  {
    MemoryTensorSource s = with_tensor(src, e + ".weight_scale");
    expect_format_error([&] { load_expert(cfg, s, 2, 3); }, e + ".weight_scale");
  }
  {
    MemoryTensorSource s = with_tensor(src, e + ".weight_shape", DType::I32, {2});  // [0, 0]
    expect_format_error([&] { load_expert(cfg, s, 2, 3); }, e + ".weight_shape: [0, 0], expected [64, 32]");
  }
  {
    MemoryTensorSource s = with_tensor(src, e + ".weight_packed", DType::I32, {64, 8});
    expect_format_error([&] { load_expert(cfg, s, 2, 3); }, e + ".weight_packed: shape [64, 8], expected [64, 4]");
  }
  BOOST_CHECK_NO_THROW(load_expert(cfg, src, 2, 3));
}
