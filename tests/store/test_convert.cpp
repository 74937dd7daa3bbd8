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
