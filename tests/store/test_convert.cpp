// convert_checkpoint: round trips in every weight format (bytes, checksums,
// alignment, shard layout), and every bad input as an error naming the tensor
// and the file.
#define BOOST_TEST_MODULE convert
#include <boost/test/unit_test.hpp>

#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <thread>
#include <sstream>

#include "common/checksum.hpp"
#include "common/error.hpp"
#include "common/numeric.hpp"
#include "format/mapped_pages.hpp"
#include "platform/memory_advice.hpp"
#include "platform/page_stats.hpp"
#include "store/converter.hpp"
#include "store/manifest.hpp"
#include "store/model_store.hpp"
#include "store/staging_dir.hpp"
#include "expect_error.hpp"
#include "synthetic_hf.hpp"

using namespace trillion;
using namespace trillion::test;
namespace fs = std::filesystem;

namespace {

ConvertReport convert(const std::string& in, const std::string& out, int64_t eps = 4, bool force = false,
                      std::ostream* log = nullptr) {
  return convert_checkpoint(ConvertOptions{in, out, eps, force, log});
}

// Converts, opens, and checks every stored tensor against the source bytes.
void round_trip(const std::string& format, bool mtp, int files) {
  TempDir tmp;
  const std::string in = tmp / "hf", out = tmp / "model";
  const auto tensors = write_synthetic_checkpoint(in, tiny_config(format, mtp ? 1 : 0), {.files = files, .mtp = mtp});
  const ConvertReport r = convert(in, out);
  BOOST_TEST(r.warnings.empty());
  BOOST_TEST(!fs::exists(out + ".partial"));
  // The shards left the page cache, for the first run to read them in on 2
  // MiB pages (format/mapped_file.hpp, drop_cached_pages); tmpfs keeps them,
  // and macOS cannot drop them.
  for (const auto& e : fs::directory_iterator(out)) {
    if (e.path().extension() != ".h5" || platform::on_memory_filesystem(e.path().string()) ||
        !platform::can_drop_file_cache())
      continue;
    const int64_t cached = cached_bytes(e.path().string());  // -1: this system cannot tell
    if (cached != -1) BOOST_TEST(cached == 0, e.path().filename());
  }

  auto store = ModelStore::open(out);
  const Manifest& m = store->manifest();
  BOOST_TEST(to_string(m.weight_format) == format);
  size_t stored = 0;
  for (const StTensor& src : tensors) {
    BOOST_TEST_CONTEXT(src.name) {
      if (src.name.ends_with(".weight_shape")) {  // an attribute of weight_packed, not a dataset
        BOOST_TEST(!store->has(src.name));
        const TensorInfo* packed = m.find_tensor(src.name.substr(0, src.name.size() - 6) + "_packed");
        BOOST_REQUIRE(packed);
        int32_t v[2];
        std::memcpy(v, src.data.data(), 8);
        BOOST_TEST(packed->weight_shape == (std::vector<int64_t>{v[0], v[1]}));
        continue;
      }
      ++stored;
      BOOST_REQUIRE(store->has(src.name));
      const TensorView t = store->tensor(src.name);
      BOOST_TEST(dtype_name(t.dtype) == src.dtype);
      BOOST_TEST(t.shape == src.shape);
      BOOST_REQUIRE(t.nbytes == src.data.size());
      BOOST_TEST(std::memcmp(t.data, src.data.data(), t.nbytes) == 0);
      const TensorInfo* info = m.find_tensor(src.name);
      BOOST_TEST(info->checksum == xxh64(src.data.data(), src.data.size()));
      BOOST_TEST(info->offset % 4096 == 0u);
      BOOST_TEST(reinterpret_cast<uintptr_t>(t.data) % 4096 == 0u);  // in place in the mapping
    }
  }
  BOOST_TEST(m.tensors().size() == stored);
  BOOST_TEST(r.tensors == int64_t(stored));
  for (const ShardInfo& s : m.shards()) BOOST_TEST(fs::file_size(out + "/" + s.file) == s.bytes);
  // config.json and the tokenizer files verbatim.
  for (const char* f : {"config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"})
    BOOST_TEST(read_bytes(out + "/" + f) == read_bytes(in + "/" + f), f);
  BOOST_TEST(!fs::exists(out + "/tiktoken.model"));
}

}  // namespace

BOOST_AUTO_TEST_CASE(round_trip_bf16_with_mtp) { round_trip("bf16", true, 3); }
BOOST_AUTO_TEST_CASE(round_trip_fp8) { round_trip("fp8", false, 2); }
BOOST_AUTO_TEST_CASE(round_trip_int4_single_file) { round_trip("int4", false, 1); }

// Two conversions of one checkpoint, more than a second apart, write the same
// bytes: HDF5 stamps objects with times unless told not to, and the
// manifest hashes each shard's metadata, so a shard linked from another
// conversion would otherwise fail its check (seen as a flaky test_bounds).
BOOST_AUTO_TEST_CASE(conversion_is_byte_reproducible) {
  TempDir tmp;
  write_synthetic_checkpoint(tmp / "hf", tiny_config("bf16"), {});
  convert(tmp / "hf", tmp / "a");
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  convert(tmp / "hf", tmp / "b");
  size_t shards = 0;
  for (const auto& e : fs::directory_iterator(tmp / "a")) {
    if (e.path().extension() != ".h5") continue;
    ++shards;
    BOOST_TEST_CONTEXT(e.path().filename()) {
      std::ifstream a(e.path(), std::ios::binary), b(tmp / "b" / e.path().filename(), std::ios::binary);
      const std::string ba{std::istreambuf_iterator<char>(a), {}}, bb{std::istreambuf_iterator<char>(b), {}};
      BOOST_TEST((!ba.empty() && ba == bb));
    }
  }
  BOOST_TEST(shards > 2u);
}

BOOST_AUTO_TEST_CASE(shard_layout_and_lazy_loading) {
  TempDir tmp;
  write_synthetic_checkpoint(tmp / "hf", tiny_config("bf16", 1), {.mtp = true});
  convert(tmp / "hf", tmp / "model", 4);
  auto store = ModelStore::open(tmp / "model");
  std::vector<std::string> files;
  for (const ShardInfo& s : store->manifest().shards()) files.push_back(s.file);
  // Layer 0 is dense; layers 1-2 have 10 experts in groups of 4; layer 3 is the MTP layer.
  const std::vector<std::string> expected = {
      "embed.h5",
      "layer-000.h5",
      "layer-001.h5",
      "layer-001-experts-000-003.h5",
      "layer-001-experts-004-007.h5",
      "layer-001-experts-008-009.h5",
      "layer-002.h5",
      "layer-002-experts-000-003.h5",
      "layer-002-experts-004-007.h5",
      "layer-002-experts-008-009.h5",
      "head.h5",
      "mtp-003.h5",
      "mtp-003-experts-000-003.h5",
      "mtp-003-experts-004-007.h5",
  };
  BOOST_TEST(files == expected, boost::test_tools::per_element());
  const ShardInfo* s = store->manifest().find_shard("layer-002-experts-008-009.h5");
  BOOST_TEST((s->role == TensorRole::experts && s->layer == 2 && s->expert_first == 8 && s->expert_last == 9));
  BOOST_TEST((store->manifest().find_shard("mtp-003-experts-004-007.h5")->role == TensorRole::mtp_experts));
  BOOST_TEST(store->manifest().find_tensor("model.layers.3.mlp.experts.5.down_proj.weight")->shard ==
             "mtp-003-experts-004-007.h5");

  // Nothing is mapped until asked; then only the shard holding the tensor.
  BOOST_TEST(store->opened_shards().empty());
  BOOST_TEST(store->mapped_bytes() == 0u);
  store->tensor("model.layers.1.mlp.experts.5.gate_proj.weight");
  store->tensor("model.layers.1.mlp.experts.6.up_proj.weight");
  BOOST_TEST(store->opened_shards() == std::vector<std::string>{"layer-001-experts-004-007.h5"});
  store->tensor("lm_head.weight");
  BOOST_TEST(store->opened_shards() == (std::vector<std::string>{"layer-001-experts-004-007.h5", "head.h5"}));
  BOOST_TEST(store->mapped_bytes() ==
             store->manifest().find_shard("head.h5")->bytes +
                 store->manifest().find_shard("layer-001-experts-004-007.h5")->bytes);
}

BOOST_AUTO_TEST_CASE(hdf5_datasets_follow_the_format) {
  TempDir tmp;
  write_synthetic_checkpoint(tmp / "hf", tiny_config("int4"), {});
  convert(tmp / "hf", tmp / "model");
  const Manifest m = Manifest::read(tmp / "model/manifest.json");
  const TensorInfo* t = m.find_tensor("model.layers.1.mlp.experts.9.down_proj.weight_packed");
  BOOST_REQUIRE(t);
  hid_t f = H5Fopen((tmp / ("model/" + t->shard)).c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  BOOST_REQUIRE(f >= 0);
  hid_t d = H5Dopen2(f, t->name.c_str(), H5P_DEFAULT);
  BOOST_REQUIRE(d >= 0);
  hid_t dcpl = H5Dget_create_plist(d);
  BOOST_TEST(H5Pget_layout(dcpl) == H5D_CONTIGUOUS);
  BOOST_TEST(H5Pget_nfilters(dcpl) == 0);
  BOOST_TEST(H5Dget_offset(d) == t->offset);
  hid_t type = H5Dget_type(d);
  BOOST_TEST(H5Tequal(type, H5T_STD_I32LE) > 0);
  BOOST_TEST(H5Aexists(d, "dtype") > 0);
  BOOST_TEST(H5Aexists(d, "checksum") > 0);
  BOOST_TEST(H5Aexists(d, "weight_shape") > 0);
  BOOST_TEST(H5Lexists(f, "model.layers.1.mlp.experts.9.down_proj.weight_shape", H5P_DEFAULT) == 0);
  BOOST_TEST(H5Aexists(f, "trillion_format") > 0);
  H5Tclose(type);
  H5Pclose(dcpl);
  H5Dclose(d);
  H5Fclose(f);
}

BOOST_AUTO_TEST_CASE(missing_tensor) {
  TempDir tmp;
  write_synthetic_checkpoint(tmp / "hf", tiny_config("bf16"), {.mutate = [](std::vector<StTensor>& v) {
    std::erase_if(v, [](const StTensor& t) { return t.name == "model.layers.2.mlp.experts.7.up_proj.weight"; });
  }});
  expect_error<FormatError>([&] { convert(tmp / "hf", tmp / "model"); },
                            {"model.layers.2.mlp.experts.7.up_proj.weight", "missing",
                             tmp / "hf/model.safetensors.index.json"});
  BOOST_TEST(!fs::exists(tmp / "model"));
  BOOST_TEST(!fs::exists(tmp / "model.partial"));
}

BOOST_AUTO_TEST_CASE(misshapen_tensor) {
  TempDir tmp;
  write_synthetic_checkpoint(tmp / "hf", tiny_config("bf16"), {.files = 1, .mutate = [](std::vector<StTensor>& v) {
    for (StTensor& t : v)
      if (t.name == "model.layers.0.self_attn.kv_b_proj.weight") t.shape = {32, 64};  // transposed, same bytes
  }});
  expect_error<FormatError>([&] { convert(tmp / "hf", tmp / "model"); },
                            {"model.layers.0.self_attn.kv_b_proj.weight", tmp / "hf/model.safetensors",
                             "shape [32, 64]", "[64, 32]"});
  BOOST_TEST(!fs::exists(tmp / "model"));
}

BOOST_AUTO_TEST_CASE(wrong_dtype) {
  TempDir tmp;
  write_synthetic_checkpoint(tmp / "hf", tiny_config("fp8"), {.files = 1, .mutate = [](std::vector<StTensor>& v) {
    for (StTensor& t : v)
      if (t.name == "model.layers.1.self_attn.o_proj.weight") {  // a bf16 weight in an fp8 checkpoint
        t.dtype = "BF16";
        t.data.resize(t.data.size() * 2);
      }
  }});
  expect_error<FormatError>([&] { convert(tmp / "hf", tmp / "model"); },
                            {"model.layers.1.self_attn.o_proj.weight", "model.safetensors", "dtype BF16",
                             "expected F8_E4M3"});
}

BOOST_AUTO_TEST_CASE(unknown_dtype) {
  TempDir tmp;
  write_synthetic_checkpoint(tmp / "hf", tiny_config("bf16"), {.files = 1, .mutate = [](std::vector<StTensor>& v) {
    for (StTensor& t : v)
      if (t.name == "model.norm.weight") t.dtype = "BF17";
  }});
  expect_error<FormatError>([&] { convert(tmp / "hf", tmp / "model"); },
                            {"model.norm.weight", tmp / "hf/model.safetensors", "unknown dtype 'BF17'"});
}

BOOST_AUTO_TEST_CASE(bad_weight_shape_value) {
  TempDir tmp;
  write_synthetic_checkpoint(tmp / "hf", tiny_config("int4"), {.files = 1, .mutate = [](std::vector<StTensor>& v) {
    for (StTensor& t : v)
      if (t.name == "model.layers.2.mlp.experts.3.gate_proj.weight_shape") t.data[0] ^= 1;
  }});
  expect_error<FormatError>([&] { convert(tmp / "hf", tmp / "model"); },
                            {"model.layers.2.mlp.experts.3.gate_proj.weight_shape", "expected [32, 64]"});
}

BOOST_AUTO_TEST_CASE(config_missing_a_field) {
  TempDir tmp;
  auto c = tiny_config("bf16");
  c.erase("kv_lora_rank");
  write_synthetic_checkpoint(tmp / "hf", tiny_config("bf16"), {});
  write_text(tmp / "hf/config.json", c.dump());
  expect_error<ConfigError>([&] { convert(tmp / "hf", tmp / "model"); }, {tmp / "hf/config.json", "kv_lora_rank"});
  fs::remove(tmp / "hf/config.json");
  expect_error<ConfigError>([&] { convert(tmp / "hf", tmp / "model"); }, {tmp / "hf/config.json"});
}

BOOST_AUTO_TEST_CASE(extra_tensors_are_warnings) {
  TempDir tmp;
  write_synthetic_checkpoint(tmp / "hf", tiny_config("bf16"), {.mutate = [](std::vector<StTensor>& v) {
    v.push_back(StTensor{"model.layers.0.self_attn.rotary_emb.inv_freq", "F32", {4}, random_bytes(16, 9)});
  }});
  std::ostringstream log;
  const ConvertReport r = convert(tmp / "hf", tmp / "model", 4, false, &log);
  BOOST_REQUIRE(r.warnings.size() == 1u);
  BOOST_TEST(r.warnings[0].find("rotary_emb.inv_freq") != std::string::npos);
  BOOST_TEST(log.str().find("warning") != std::string::npos);
  BOOST_TEST(log.str().find("convert:") != std::string::npos);  // progress went to the log
  auto store = ModelStore::open(tmp / "model");
  BOOST_TEST(!store->has("model.layers.0.self_attn.rotary_emb.inv_freq"));
}

BOOST_AUTO_TEST_CASE(output_rules) {
  TempDir tmp;
  write_synthetic_checkpoint(tmp / "hf", tiny_config("bf16"), {});
  // An empty directory made in advance is fine.
  fs::create_directory(tmp / "model");
  convert(tmp / "hf", tmp / "model");
  const auto manifest_before = read_bytes(tmp / "model/manifest.json");
  // A second conversion needs --force, which replaces the model.
  expect_error<InputError>([&] { convert(tmp / "hf", tmp / "model"); }, {tmp / "model", "--force"});
  convert(tmp / "hf", tmp / "model", 3, true);
  BOOST_TEST(Manifest::read(tmp / "model/manifest.json").experts_per_shard == 3);
  BOOST_TEST(!fs::exists(tmp / "model.partial"));
  // A non-empty directory that is not a model is never replaced.
  fs::create_directory(tmp / "mine");
  write_text(tmp / "mine/notes.txt", "precious");
  expect_error<InputError>([&] { convert(tmp / "hf", tmp / "mine", 4, true); }, {tmp / "mine", "refusing"});
  BOOST_TEST(fs::exists(tmp / "mine/notes.txt"));
  expect_error<InputError>([&] { convert(tmp / "hf", tmp / "x", 0); }, {"experts-per-shard"});
}

BOOST_AUTO_TEST_CASE(interrupted_conversion_leaves_no_model) {
  TempDir tmp;
  {
    // Unwinding without commit (an error mid-conversion) removes the partial output.
    StagingDir stage(tmp / "model", false, nullptr);
    write_text(stage.path() + "/layer-000.h5", "half");
    BOOST_TEST(fs::exists(tmp / "model.partial"));
  }
  BOOST_TEST(!fs::exists(tmp / "model.partial"));
  BOOST_TEST(!fs::exists(tmp / "model"));

  // A kill leaves model.partial (with its marker) behind: never "model", and
  // the next conversion cleans it up.
  fs::create_directory(tmp / "model.partial");
  write_text(tmp / "model.partial/.trillion-partial", "");
  write_text(tmp / "model.partial/layer-000.h5", "half");
  write_synthetic_checkpoint(tmp / "hf", tiny_config("bf16"), {});
  std::ostringstream log;
  convert(tmp / "hf", tmp / "model", 4, false, &log);
  BOOST_TEST(log.str().find("interrupted") != std::string::npos);
  BOOST_TEST(!fs::exists(tmp / "model.partial"));
  BOOST_TEST(fs::exists(tmp / "model/manifest.json"));

  // A "*.partial" that trillion did not create is left alone.
  fs::create_directory(tmp / "other.partial");
  expect_error<InputError>([&] { convert(tmp / "hf", tmp / "other"); }, {"other.partial", "not created by trillion"});
}

BOOST_AUTO_TEST_CASE(int4_weight_shape_as_int64) {
  // torch.tensor(shape) is int64: compressed-tensors writers may store it so.
  TempDir tmp;
  write_synthetic_checkpoint(tmp / "hf", tiny_config("int4"), {.mutate = [](std::vector<StTensor>& v) {
    for (StTensor& t : v)
      if (t.name.ends_with(".weight_shape")) {
        int32_t v32[2];
        std::memcpy(v32, t.data.data(), 8);
        int64_t v64[2] = {v32[0], v32[1]};
        t.dtype = "I64";
        t.data.assign(reinterpret_cast<uint8_t*>(v64), reinterpret_cast<uint8_t*>(v64) + 16);
      }
  }});
  convert(tmp / "hf", tmp / "model");
  auto store = ModelStore::open(tmp / "model");
  const TensorInfo* t = store->manifest().find_tensor("model.layers.1.mlp.experts.0.down_proj.weight_packed");
  BOOST_REQUIRE(t);
  BOOST_TEST(t->weight_shape == (std::vector<int64_t>{64, 32}));
}

// --- convert --quantize ----------------------------------------------------

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
