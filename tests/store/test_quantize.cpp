// convert --quantize: the scalar rules by hand, round trips within their
// bounds, FP8 to int8 within half a group's scale of each FP8 value, and
// every input quantizing refuses (split from test_convert.cpp).
#define BOOST_TEST_MODULE quantize
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/numeric.hpp"
#include "store/converter.hpp"
#include "store/manifest.hpp"
#include "store/model_store.hpp"
#include "store/quantize.hpp"
#include "expect_error.hpp"
#include "synthetic_hf.hpp"

using namespace trillion;
using namespace trillion::test;
namespace fs = std::filesystem;

namespace {

// Random bf16 bytes with every NaN/Inf pattern made finite (an exponent bit cleared).
void finite_bf16(std::vector<StTensor>& v) {
  for (StTensor& t : v) {
    if (t.dtype != "BF16") continue;
    for (size_t i = 0; i + 1 < t.data.size(); i += 2)
      if ((t.data[i + 1] & 0x7f) == 0x7f && (t.data[i] & 0x80)) t.data[i + 1] &= 0xbf;
  }
}

// Random fp8 checkpoint bytes made finite: bf16 as above, no e4m3 NaN code
// (0x7f, 0xff: to +-448), and every F32 (the block scales) a power of two in
// [2^-12, 2^3] chosen by its bytes.
void finite_fp8(std::vector<StTensor>& v) {
  finite_bf16(v);
  for (StTensor& t : v) {
    if (t.dtype == "F8_E4M3")
      for (auto& b : t.data)
        if ((b & 0x7f) == 0x7f) b = uint8_t(b & 0xfe);
    if (t.dtype == "F32")
      for (size_t i = 0; i + 3 < t.data.size(); i += 4) {
        const float x = std::ldexp(1.0f, int(t.data[i]) % 16 - 12);
        std::memcpy(&t.data[i], &x, 4);
      }
  }
}

ConvertReport convert_quantized(const std::string& in, const std::string& out, WeightFormat f) {
  ConvertOptions o{in, out, 4, false, nullptr};
  o.quantize = f;
  o.threads = 2;
  return convert_checkpoint(o);
}

}  // namespace

BOOST_AUTO_TEST_CASE(quantize_scalar_rules) {
  // bf16_round_up: the smallest bf16 >= x.
  BOOST_TEST(bf16_round_up(1.0) == 0x3f80);
  BOOST_TEST(bf16_round_up(std::nextafter(1.0, 2.0)) == 0x3f81);  // just above 1: the next bf16
  BOOST_TEST(bf16_round_up(1.0 + 1.0 / 256) == 0x3f81);           // halfway: up, not to even
  BOOST_TEST(bf16_round_up(1.0 + 1.0 / 128) == 0x3f81);           // exact
  BOOST_TEST(bf16_round_up(0.5 / 127) == 0x3b82);  // 0.0039370 = 2^-8 * 1.00787: 1.0078125 is below, 1.015625 not
  for (double x : {1e-3, 0.1234567, 3.0 / 127, 7.77, 1e5}) {
    const double b = bf16_to_f32(bf16_round_up(x));
    BOOST_TEST(b >= x);
    BOOST_TEST(double(bf16_to_f32(uint16_t(bf16_round_up(x) - 1))) < x);
  }
  // e4m3: every finite code round-trips; midpoints go to the even code; saturation.
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;
    BOOST_TEST(int(f32_to_e4m3(fp8e4m3_to_f32(uint8_t(c)))) == c, "code " << c);
  }
  BOOST_TEST(int(f32_to_e4m3(1.0625f)) == 0x38);   // between 1 (0x38) and 1.125 (0x39): even
  BOOST_TEST(int(f32_to_e4m3(1.1875f)) == 0x3a);   // between 1.125 and 1.25 (0x3a): even
  BOOST_TEST(int(f32_to_e4m3(1.07f)) == 0x39);
  BOOST_TEST(int(f32_to_e4m3(3.0f / 1024)) == 0x02);  // subnormal 1.5 * 2^-9 -> 2 * 2^-9 (even)
  BOOST_TEST(int(f32_to_e4m3(500.0f)) == 0x7e);
  BOOST_TEST(int(f32_to_e4m3(-1e9f)) == 0xfe);
  BOOST_TEST(int(f32_to_e4m3(-0.0f)) == 0x80);
}

BOOST_AUTO_TEST_CASE(quantize_int8_by_hand) {
  // One row of 33 columns: a full group and a partial one (a single column).
  std::vector<uint16_t> w(33);
  for (int c = 0; c < 32; ++c) w[size_t(c)] = f32_to_bf16(float(c - 16) / 8.0f);  // absmax 2
  w[32] = f32_to_bf16(-0.75f);
  const QuantizedMatrix q = quantize_matrix(WeightFormat::int8_group, "m", w.data(), 1, 33, nullptr);
  BOOST_REQUIRE(q.tensors.size() == 2u);
  BOOST_TEST(q.tensors[0].name == "m.weight");
  BOOST_TEST(q.tensors[1].name == "m.weight_scale");
  BOOST_TEST(q.tensors[1].shape == (std::vector<int64_t>{1, 2}));
  const auto* s = reinterpret_cast<const uint16_t*>(q.tensors[1].data.data());
  const double s0 = bf16_to_f32(s[0]), s1 = bf16_to_f32(s[1]);
  BOOST_TEST(s0 >= 2.0 / 127);
  BOOST_TEST(s0 < 2.0 / 127 * (1 + 1.0 / 128));
  BOOST_TEST(s1 >= 0.75 / 127);
  const auto* qi = reinterpret_cast<const int8_t*>(q.tensors[0].data.data());
  BOOST_TEST(int(qi[0]) == int(std::nearbyint(-2.0 / s0)));
  BOOST_TEST(int(qi[32]) == int(std::nearbyint(-0.75 / s1)));
  BOOST_TEST(int(qi[16]) == 0);
  double err = 0, sq = 0;
  for (int c = 0; c < 33; ++c) {
    const double x = bf16_to_f32(w[size_t(c)]), d = qi[c] * (c < 32 ? s0 : s1);
    BOOST_TEST(std::fabs(x - d) <= (c < 32 ? s0 : s1) / 2);
    err += (x - d) * (x - d);
    sq += x * x;
  }
  BOOST_TEST(q.stats.sum_sq_err == err, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(q.stats.sum_sq == sq, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(q.stats.bytes == 33u + 4u);
  // A non-finite value is an error naming the tensor and the place.
  w[20] = 0x7fc0;
  expect_error<FormatError>([&] { quantize_matrix(WeightFormat::int8_group, "m", w.data(), 1, 33, nullptr); },
                            {"m.weight", "[0, 20]", "not finite"});
}

BOOST_AUTO_TEST_CASE(quantize_round_trips) {
  for (WeightFormat f : {WeightFormat::int8_group, WeightFormat::int4_group, WeightFormat::fp8_block}) {
    BOOST_TEST_CONTEXT(to_string(f)) {
      TempDir tmp;
      const auto src = write_synthetic_checkpoint(tmp / "hf", tiny_config("bf16", 1), {.mtp = true, .mutate = finite_bf16});
      const ConvertReport r = convert_quantized(tmp / "hf", tmp / "model", f);
      BOOST_REQUIRE(r.quantization.has_value());
      auto store = ModelStore::open(tmp / "model");  // the loader's checks: table, manifest, config agree
      const Manifest& m = store->manifest();
      BOOST_TEST((m.weight_format == f));
      BOOST_TEST(m.quantized_from == "bf16");
      BOOST_TEST(store->config().requantized);
      BOOST_TEST((store->config().weight_format == f));
      // Linear layers and lm_head quantized; embedding, norms, router, bias, MTP verbatim.
      const char* weight = f == WeightFormat::int4_group ? "lm_head.weight_packed" : "lm_head.weight";
      BOOST_TEST(store->has(weight));
      BOOST_TEST(dtype_name(m.find_tensor(weight)->dtype) ==
                 (f == WeightFormat::int8_group ? "I8" : f == WeightFormat::int4_group ? "I32" : "F8_E4M3"));
      for (const StTensor& t : src) {
        const bool verbatim = t.name.find("_proj") == std::string::npos && t.name != "lm_head.weight";
        const bool mtp = t.name.rfind("model.layers.3.", 0) == 0;
        // int4 keeps q_b_proj (in_features 48) bf16.
        const bool kept = f == WeightFormat::int4_group && t.name.find("q_b_proj") != std::string::npos;
        if (!(verbatim || mtp || kept)) {
          const std::string base = t.name.substr(0, t.name.size() - 7);  // without ".weight"
          const std::string stored = f == WeightFormat::int4_group ? base + ".weight_packed" : t.name;
          BOOST_TEST((store->has(stored) && m.find_tensor(stored)->dtype != DType::BF16), t.name);
          continue;
        }
        BOOST_REQUIRE_MESSAGE(store->has(t.name), t.name);
        const TensorView v = store->tensor(t.name);
        BOOST_TEST((v.nbytes == t.data.size() && std::memcmp(v.data, t.data.data(), v.nbytes) == 0), t.name);
      }
      const QuantizationReport& q = *r.quantization;
      // tiny: 3 layers (1 dense), 10 experts: 5 attention x 3, 3 dense, 3 x 2 shared, 60 x 2 routed, lm_head.
      BOOST_TEST(q.roles.at(LinearRole::routed_experts).matrices == 60);
      BOOST_TEST(q.roles.at(LinearRole::dense_mlp).matrices == 3);
      BOOST_TEST(q.roles.at(LinearRole::shared_experts).matrices == 6);
      BOOST_TEST(q.roles.at(LinearRole::lm_head).matrices == 1);
      BOOST_TEST(q.roles.at(LinearRole::attention).matrices == (f == WeightFormat::int4_group ? 12 : 15));
      BOOST_TEST(q.kept.size() == (f == WeightFormat::int4_group ? 3u : 0u));
      const double bound = f == WeightFormat::int8_group ? 1.0 / 127 : f == WeightFormat::int4_group ? 1.0 / 7 : 1.0 / 8;
      BOOST_TEST(q.overall.rel_rms() > 0);
      BOOST_TEST(q.overall.rel_rms() < bound);
      if (f == WeightFormat::int8_group) {  // 8 + 16/32, a little more where in % 32 != 0 (q_b_proj: 48)
        BOOST_TEST(q.roles.at(LinearRole::routed_experts).bits_per_weight() == 8.5);
        BOOST_TEST((q.overall.bits_per_weight() > 8.5 && q.overall.bits_per_weight() < 8.52));
      }
      BOOST_TEST(fs::exists(tmp / "model/quantization.json"));
      const auto cfg = nlohmann::json::parse(read_bytes(tmp / "model/config.json"));
      BOOST_TEST(cfg["quantization_config"]["quant_method"] == "trillion");
      BOOST_TEST(cfg["quantization_config"]["weight_format"] == to_string(f));
      // Same bytes whatever the thread count.
      ConvertOptions o{tmp / "hf", tmp / "model1", 4, false, nullptr};
      o.quantize = f;
      o.threads = 1;
      convert_checkpoint(o);
      const Manifest m1 = Manifest::read(tmp / "model1/manifest.json");
      for (const TensorInfo& t : m.tensors()) BOOST_TEST(m1.find_tensor(t.name)->checksum == t.checksum, t.name);
    }
  }
}

// A native fp8 checkpoint (DeepSeek-V3's format) to int8: every fp8 matrix
// and the bf16 lm_head become int8 groups, the scale_inv tensors go, the MTP
// layer and everything not a linear layer stay as they were; each int8
// weight is within half its group's scale of the fp8 value (code x block
// scale) it came from. tests/e2e/test_quantize.py checks the bytes against numpy.
BOOST_AUTO_TEST_CASE(quantize_fp8_to_int8) {
  TempDir tmp;
  const auto src = write_synthetic_checkpoint(tmp / "hf", tiny_config("fp8", 1), {.mtp = true, .mutate = finite_fp8});
  const ConvertReport r = convert_quantized(tmp / "hf", tmp / "model", WeightFormat::int8_group);
  BOOST_REQUIRE(r.quantization.has_value());
  auto store = ModelStore::open(tmp / "model");
  const Manifest& m = store->manifest();
  BOOST_TEST((m.weight_format == WeightFormat::int8_group));
  BOOST_TEST(m.quantized_from == "fp8");
  BOOST_TEST((store->config().requantized && store->config().requantized_from == WeightFormat::fp8_block));
  std::map<std::string, const StTensor*> by_name;
  for (const StTensor& t : src) by_name[t.name] = &t;
  int quantized = 0;
  for (const StTensor& t : src) {
    const bool mtp = t.name.rfind("model.layers.3.", 0) == 0;
    const bool linear = !mtp && (t.name.find("_proj") != std::string::npos || t.name == "lm_head.weight");
    if (linear && t.name.ends_with("_scale_inv")) {
      BOOST_TEST(!store->has(t.name), t.name);  // int8 groups carry their own scales
      continue;
    }
    if (linear) {
      BOOST_TEST((store->has(t.name) && m.find_tensor(t.name)->dtype == DType::I8), t.name);
      BOOST_TEST(store->has(t.name + "_scale"), t.name);
      ++quantized;
      continue;
    }
    BOOST_REQUIRE_MESSAGE(store->has(t.name), t.name);  // verbatim, MTP's fp8 matrices and scales too
    const TensorView v = store->tensor(t.name);
    BOOST_TEST((v.nbytes == t.data.size() && std::memcmp(v.data, t.data.data(), v.nbytes) == 0), t.name);
  }
  BOOST_TEST(quantized == 15 + 3 + 6 + 60 + 1);
  // One matrix by hand: w = code x scale_inv of its 128x128 block; |w - q s| <= s / 2.
  const std::string name = "model.layers.1.mlp.experts.3.up_proj.weight";
  const StTensor& w8 = *by_name.at(name);
  const StTensor& sinv = *by_name.at(name + "_scale_inv");
  const TensorView q = store->tensor(name), qs = store->tensor(name + "_scale");
  const int64_t rows = w8.shape[0], cols = w8.shape[1], groups = (cols + 31) / 32, cb = (cols + 127) / 128;
  double worst = 0;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t c = 0; c < cols; ++c) {
      float block_scale;
      std::memcpy(&block_scale, &sinv.data[size_t(((i / 128) * cb + c / 128) * 4)], 4);
      const double w = double(fp8e4m3_to_f32(uint8_t(w8.data[size_t(i * cols + c)]))) * double(block_scale);
      const double s = bf16_to_f32(reinterpret_cast<const uint16_t*>(qs.data)[i * groups + c / 32]);
      const double d = double(reinterpret_cast<const int8_t*>(q.data)[i * cols + c]) * s;
      BOOST_REQUIRE(std::fabs(w - d) <= s / 2);
      worst = std::max(worst, std::fabs(w - d));
    }
  BOOST_TEST(worst > 0);
  const QuantizationReport& rep = *r.quantization;
  BOOST_TEST((rep.from == WeightFormat::fp8_block));
  BOOST_TEST(rep.roles.at(LinearRole::routed_experts).matrices == 60);
  BOOST_TEST(rep.roles.at(LinearRole::lm_head).matrices == 1);
  BOOST_TEST((rep.overall.rel_rms() > 0 && rep.overall.rel_rms() < 1.0 / 127));
  const auto cfg = nlohmann::json::parse(read_bytes(tmp / "model/config.json"));
  BOOST_TEST(cfg["quantization_config"]["quant_method"] == "trillion");
  BOOST_TEST(cfg["quantization_config"]["quantized_from"] == "fp8");
}

BOOST_AUTO_TEST_CASE(quantize_refusals) {
  TempDir tmp;
  write_synthetic_checkpoint(tmp / "hf", tiny_config("fp8"), {});
  expect_error<InputError>([&] { convert_quantized(tmp / "hf", tmp / "model", WeightFormat::int4_group); },
                           {"--quantize int4", "an fp8 checkpoint is quantized to int8 only", tmp / "hf/config.json"});
  BOOST_TEST(!fs::exists(tmp / "model"));
  ConvertOptions o{tmp / "hf", tmp / "model", 4, false, nullptr};
  o.quantize = WeightFormat::bf16;
  expect_error<InputError>([&] { convert_checkpoint(o); }, {"--quantize must be int8, int4 or fp8"});
  // A NaN in a linear layer: an error naming the tensor, and no output.
  write_synthetic_checkpoint(tmp / "hf16", tiny_config("bf16"), {.mutate = [](std::vector<StTensor>& v) {
    finite_bf16(v);
    for (StTensor& t : v)
      if (t.name == "model.layers.1.mlp.experts.3.up_proj.weight") t.data[7] = 0x7f, t.data[6] = 0xc0;
  }});
  expect_error<FormatError>([&] { convert_quantized(tmp / "hf16", tmp / "model", WeightFormat::fp8_block); },
                            {"model.layers.1.mlp.experts.3.up_proj.weight", "[0, 3]", "not finite"});
  BOOST_TEST(!fs::exists(tmp / "model"));
  BOOST_TEST(!fs::exists(tmp / "model.partial"));
}
