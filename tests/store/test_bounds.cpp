// Issue 10 items 2 and 6 on the weights path: config.json's counts checked
// against the files before the table they size is built; file names read from
// a manifest or an HF index that lead out of their directory refused.
#define BOOST_TEST_MODULE store_bounds
#include <boost/test/unit_test.hpp>

#include <hdf5.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/contained_path.hpp"
#include "common/error.hpp"
#include "format/hf_checkpoint.hpp"
#include "store/converter.hpp"
#include "store/model_store.hpp"
#include "expect_error.hpp"
#include "synthetic_hf.hpp"

using namespace trillion;
using namespace trillion::test;
namespace fs = std::filesystem;

namespace {

void convert(const std::string& in, const std::string& out) {
  convert_checkpoint(ConvertOptions{in, out, 4, false, nullptr});
}

// The tiny checkpoint's tensors (3 layers, 10 experts) under a config.json
// that claims more.
void write_claiming(const std::string& dir, const std::string& field, int64_t value) {
  write_synthetic_checkpoint(dir, tiny_config("bf16"), {});
  nlohmann::json c = tiny_config("bf16");
  c[field] = value;
  write_text(dir + "/config.json", c.dump());
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

// Today's code built the table of config.json's layers x experts first: a
// config claiming 1e9 layers allocated until the kernel killed convert.
BOOST_AUTO_TEST_CASE(convert_names_the_first_missing_layer_and_the_field) {
  TempDir tmp;
  write_claiming(tmp / "hf", "num_hidden_layers", 5000);
  expect_error<FormatError>([&] { convert(tmp / "hf", tmp / "model"); },
                            {tmp / "hf/config.json", "num_hidden_layers is 5000", tmp / "hf/model.safetensors.index.json",
                             "no tensor 'model.layers.3.input_layernorm.weight'", "layers 0-2"});
  BOOST_TEST(!fs::exists(tmp / "model"));
  BOOST_TEST(!fs::exists(tmp / "model.partial"));
}

BOOST_AUTO_TEST_CASE(convert_names_the_first_missing_expert_and_the_field) {
  TempDir tmp;
  write_claiming(tmp / "hf", "n_routed_experts", 60000);
  expect_error<FormatError>([&] { convert(tmp / "hf", tmp / "model"); },
                            {"n_routed_experts is 60000", "no tensor 'model.layers.1.mlp.experts.10.gate_proj.weight'",
                             "holds 10 experts"});
}

BOOST_AUTO_TEST_CASE(model_store_checks_the_config_against_the_manifest) {
  TempDir tmp;
  write_synthetic_checkpoint(tmp / "hf", tiny_config("bf16"), {});
  convert(tmp / "hf", tmp / "model");
  nlohmann::json c = tiny_config("bf16");
  c["num_hidden_layers"] = 60000;
  write_text(tmp / "model/config.json", c.dump());
  expect_error<FormatError>([&] { ModelStore::open(tmp / "model"); },
                            {tmp / "model/config.json", "num_hidden_layers is 60000", tmp / "model/manifest.json",
                             "model.layers.3.input_layernorm.weight"});
}

BOOST_AUTO_TEST_CASE(file_names_that_leave_the_directory) {
  TempDir tmp;
  fs::create_directories(tmp / "dir");
  write_text(tmp / "outside.bin", "x");
  write_text(tmp / "dir/inside.bin", "x");
  fs::create_symlink(tmp / "outside.bin", tmp / "dir/out-link");
  fs::create_symlink("inside.bin", tmp / "dir/in-link");
  const fs::path dir = tmp / "dir";
  BOOST_TEST(outside_reason(dir, "inside.bin") == "");
  BOOST_TEST(outside_reason(dir, "in-link") == "");
  BOOST_TEST(outside_reason(dir, "not-yet-written.h5") == "");  // a host holds only its shards
  BOOST_TEST(outside_reason(dir, "/etc/passwd") == "is an absolute path");
  BOOST_TEST(outside_reason(dir, "../outside.bin") == "has a '..' component");
  BOOST_TEST(outside_reason(dir, "a/../../outside.bin") == "has a '..' component");
  BOOST_TEST(outside_reason(dir, "sub/x.h5") == "is not a file name (no directories allowed)");
  BOOST_TEST(outside_reason(dir, "") == "is empty");
  BOOST_TEST(outside_reason(dir, std::string("a\0b", 3)) == "contains a NUL byte");
  BOOST_TEST(outside_reason(dir, "out-link").find("is a symlink to " + fs::canonical(tmp / "outside.bin").string()) == 0);
  // The one allowed way out: a second root (a hub cache's blobs).
  BOOST_TEST(outside_reason(dir, "out-link", tmp.path()) == "");
}

BOOST_AUTO_TEST_CASE(hf_index_entries_stay_in_the_checkpoint) {
  TempDir tmp;
  write_synthetic_checkpoint(tmp / "hf", tiny_config("bf16"), {});
  const std::string index = tmp / "hf/model.safetensors.index.json";
  const std::string original = read_text(index);
  nlohmann::json j = nlohmann::json::parse(original);
  const std::string name = j["weight_map"].begin().key();
  const std::string file = j["weight_map"].begin().value();

  j["weight_map"][name] = (fs::path(tmp / "hf") / file).string();  // the right file, but by absolute path
  write_text(index, j.dump());
  expect_error<FormatError>([&] { HfCheckpoint ck(tmp / "hf"); }, {index, name, "is an absolute path"});

  // A symlink in the checkpoint that points out of it.
  fs::rename(fs::path(tmp / "hf") / file, tmp / file);
  fs::create_symlink(tmp / file, fs::path(tmp / "hf") / file);
  write_text(index, original);
  expect_error<FormatError>([&] { HfCheckpoint ck(tmp / "hf"); }, {index, name, file, "is a symlink to", "outside"});

  // The Hugging Face hub cache's own layout: snapshots/<rev>/x -> ../../blobs/<hash>.
  const fs::path repo = tmp / "models--x--y";
  fs::create_directories(repo / "blobs");
  fs::create_directories(repo / "snapshots");
  fs::rename(tmp / "hf", repo / "snapshots/rev");
  fs::remove(repo / "snapshots/rev" / file);
  fs::rename(tmp / file, repo / "blobs/0123abcd");
  fs::create_symlink("../../blobs/0123abcd", repo / "snapshots/rev" / file);
  BOOST_CHECK_NO_THROW(HfCheckpoint ck((repo / "snapshots/rev").string()));
}

BOOST_AUTO_TEST_CASE(manifest_shards_stay_in_the_model) {
  TempDir tmp;
  write_synthetic_checkpoint(tmp / "hf", tiny_config("bf16"), {});
  convert(tmp / "hf", tmp / "model");
  const nlohmann::json m = nlohmann::json::parse(read_text(tmp / "model/manifest.json"));
  const std::string shard = m["shards"][0]["file"];
  fs::rename(fs::path(tmp / "model") / shard, tmp / shard);
  fs::create_symlink(tmp / shard, fs::path(tmp / "model") / shard);
  expect_error<FormatError>([&] { ModelStore::open(tmp / "model"); },
                            {tmp / "model/manifest.json", "shard '" + shard + "'", "is a symlink to", "outside"});
  // Linked from another converted model (shards shared between model
  // directories): allowed.
  fs::remove(fs::path(tmp / "model") / shard);
  convert(tmp / "hf", tmp / "other");
  fs::create_symlink(fs::path(tmp / "other") / shard, fs::path(tmp / "model") / shard);
  std::string in_shard;
  for (const auto& [name, t] : m["tensors"].items())
    if (t["shard"] == shard) in_shard = name;
  BOOST_CHECK_NO_THROW(ModelStore::open(tmp / "model")->tensor(in_shard));  // mapped, checksum verified
  nlohmann::json bad = m;
  bad["shards"][0]["file"] = "../" + shard;
  write_text(tmp / "model/manifest.json", bad.dump());
  expect_error<FormatError>([&] { ModelStore::open(tmp / "model"); }, {"has a '..' component"});
}

// An HDF5 external link names another file by path: HDF5 would open it.
BOOST_AUTO_TEST_CASE(shard_datasets_that_link_to_other_files_are_refused) {
  TempDir tmp;
  write_synthetic_checkpoint(tmp / "hf", tiny_config("bf16"), {});
  convert(tmp / "hf", tmp / "model");
  const std::string name = "model.layers.0.input_layernorm.weight";
  const nlohmann::json m = nlohmann::json::parse(read_text(tmp / "model/manifest.json"));
  const std::string shard = m["tensors"][name]["shard"];
  fs::copy_file(fs::path(tmp / "model") / shard, tmp / "elsewhere.h5");
  hid_t f = H5Fopen((fs::path(tmp / "model") / shard).c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  BOOST_REQUIRE(f >= 0);
  BOOST_REQUIRE(H5Ldelete(f, name.c_str(), H5P_DEFAULT) >= 0);  // the bytes stay where they were
  BOOST_REQUIRE(H5Lcreate_external((tmp / "elsewhere.h5").c_str(), name.c_str(), f, name.c_str(), H5P_DEFAULT,
                                   H5P_DEFAULT) >= 0);
  H5Fclose(f);
  nlohmann::json edited = m;  // the file grew by the link: keep the size check quiet
  for (auto& s : edited["shards"])
    if (s["file"] == shard) s["bytes"] = fs::file_size(fs::path(tmp / "model") / shard);
  write_text(tmp / "model/manifest.json", edited.dump());
  // The shard's metadata changed: refused before libhdf5 parses it ...
  expect_error<FormatError>([&] { ModelStore::open(tmp / "model", StoreOptions{false})->tensor(name); },
                            {shard, "HDF5 metadata changed"});
  // ... and, with a manifest from before metadata checksums, by the link check.
  for (auto& s : edited["shards"]) s.erase("metadata_checksum");
  write_text(tmp / "model/manifest.json", edited.dump());
  auto store = ModelStore::open(tmp / "model", StoreOptions{false});
  expect_error<FormatError>([&] { store->tensor(name); }, {shard, name, "external link"});
}

// Item 6: convert's output appears whole (OUTPUT.partial, renamed when
// complete); a second convert to the same output must not delete the
// staging directory of one still running.
BOOST_AUTO_TEST_CASE(staging_of_a_running_convert_is_left_alone) {
  TempDir tmp;
  write_synthetic_checkpoint(tmp / "hf", tiny_config("bf16"), {});
  fs::create_directory(tmp / "model.partial");
  write_text(tmp / "model.partial/layer-000.h5", "being written");
  // pid 1 always runs: as if another convert were writing.
  write_text(tmp / "model.partial/.trillion-partial", "trillion convert in progress, pid 1; safe to delete");
  expect_error<InputError>([&] { convert(tmp / "hf", tmp / "model"); },
                           {tmp / "model.partial", "another trillion convert (pid 1)"});
  BOOST_TEST(read_text(tmp / "model.partial/layer-000.h5") == "being written");
  // Its writer gone (no such pid), the directory is stale and replaced.
  write_text(tmp / "model.partial/.trillion-partial", "trillion convert in progress, pid 2147483646; safe to delete");
  BOOST_CHECK_NO_THROW(convert(tmp / "hf", tmp / "model"));
  BOOST_TEST(fs::exists(tmp / "model/manifest.json"));
}
