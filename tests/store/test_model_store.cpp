// ModelStore on damaged models: each problem is a FormatError naming the file
// (and the tensor), detected before any bad byte is handed out.
#define BOOST_TEST_MODULE model_store
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <filesystem>
#include <functional>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "store/converter.hpp"
#include "store/inspect.hpp"
#include "store/manifest.hpp"
#include "store/model_store.hpp"
#include "expect_error.hpp"
#include "store/shard_reader.hpp"
#include "synthetic_hf.hpp"

using namespace trillion;
using namespace trillion::test;
namespace fs = std::filesystem;

namespace {

// A converted tiny fp8 model in a temporary directory.
struct Model {
  TempDir tmp;
  std::string dir = tmp / "model";
  Model() {
    write_synthetic_checkpoint(tmp / "hf", tiny_config("fp8"), {});
    convert_checkpoint(ConvertOptions{tmp / "hf", dir, 4, false, nullptr});
  }
  std::string path_of(const std::string& tensor) const {
    return dir + "/" + Manifest::read(dir + "/manifest.json").find_tensor(tensor)->shard;
  }
  uint64_t offset_of(const std::string& tensor) const {
    return Manifest::read(dir + "/manifest.json").find_tensor(tensor)->offset;
  }
  void poke(const std::string& file, uint64_t at, const std::string& bytes) const {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(std::streamoff(at));
    f.write(bytes.data(), std::streamsize(bytes.size()));
  }
  void edit_manifest(const std::function<void(nlohmann::json&)>& f) const {
    std::ifstream in(dir + "/manifest.json");
    nlohmann::json j = nlohmann::json::parse(in);
    f(j);
    write_text(dir + "/manifest.json", j.dump());
  }
};

const std::string kExpert = "model.layers.2.mlp.experts.5.gate_proj.weight";
const std::string kExpertShard = "layer-002-experts-004-007.h5";

}  // namespace

BOOST_AUTO_TEST_CASE(flipped_bytes_fail_the_checksum) {
  Model m;
  const std::string file = m.path_of(kExpert);
  m.poke(file, m.offset_of(kExpert) + 17, "\x5a");
  auto store = ModelStore::open(m.dir);
  expect_error<FormatError>([&] { store->tensor(kExpert); }, {file, kExpert, "checksum mismatch"});
  // Its neighbours in the same shard are fine.
  BOOST_CHECK_NO_THROW(store->tensor("model.layers.2.mlp.experts.5.up_proj.weight"));
  // Without verification the (wrong) bytes are handed out: the caller chose speed.
  auto fast = ModelStore::open(m.dir, StoreOptions{false});
  BOOST_CHECK_NO_THROW(fast->tensor(kExpert));
  // inspect --verify reports it by tensor and file, and only it.
  const VerifyReport r = verify_model(*fast, nullptr);
  BOOST_REQUIRE(r.problems.size() == 1u);
  BOOST_TEST(r.problems[0].file == file);
  BOOST_TEST(r.problems[0].tensor == kExpert);
  BOOST_TEST(r.tensors == int64_t(fast->manifest().tensors().size()) - 1);
}

BOOST_AUTO_TEST_CASE(damaged_superblock) {
  Model m;
  const std::string file = m.dir + "/layer-001.h5";
  m.poke(file, 0, std::string(64, '\0'));
  // The metadata checksum refuses it before libhdf5 reads a byte of it.
  expect_error<FormatError>([&] { ModelStore::open(m.dir)->tensor("model.layers.1.input_layernorm.weight"); },
                            {file, "HDF5 metadata changed since conversion", "manifest.json says"});
  // A manifest from before metadata checksums: libhdf5's own check answers.
  m.edit_manifest([](nlohmann::json& j) {
    for (auto& s : j["shards"]) s.erase("metadata_checksum");
  });
  auto store = ModelStore::open(m.dir);
  expect_error<FormatError>([&] { store->tensor("model.layers.1.input_layernorm.weight"); },
                            {file, "not a readable HDF5 file"});
  BOOST_CHECK_NO_THROW(store->tensor("model.layers.0.input_layernorm.weight"));
  const VerifyReport r = verify_model(*store, nullptr);
  BOOST_REQUIRE(r.problems.size() == 1u);
  BOOST_TEST(r.problems[0].file == file);
  BOOST_TEST(r.problems[0].tensor.empty());
}

// A changed attribute (metadata, outside every tensor's bytes) is refused by
// the metadata checksum; tensor bytes are the per-tensor checksums' job.
BOOST_AUTO_TEST_CASE(changed_metadata_is_refused_before_hdf5_parses_it) {
  Model m;
  const std::string file = m.path_of(kExpert);
  const Manifest man = Manifest::read(m.dir + "/manifest.json");
  const ShardInfo* info = man.find_shard(kExpertShard);
  BOOST_REQUIRE(info && info->metadata_checksum);
  std::vector<const TensorInfo*> ts = man.tensors_of(kExpertShard);
  {
    const MappedFile f(file);
    BOOST_TEST(shard_metadata_checksum(f.data(), f.size(), ts) == *info->metadata_checksum);
  }
  // The byte before the first tensor's data is HDF5's (metadata or its
  // alignment padding), never a tensor's: change it.
  uint64_t first = fs::file_size(file);
  for (const TensorInfo* t : ts) first = std::min(first, t->offset);
  BOOST_REQUIRE(first > 0);
  m.poke(file, first - 1, "\x77");
  expect_error<FormatError>([&] { ModelStore::open(m.dir)->tensor(kExpert); }, {file, "HDF5 metadata changed"});
}

BOOST_AUTO_TEST_CASE(truncated_shard) {
  Model m;
  const std::string file = m.dir + "/" + kExpertShard;
  fs::resize_file(file, fs::file_size(file) - 100);
  auto store = ModelStore::open(m.dir);
  expect_error<FormatError>([&] { store->tensor(kExpert); },
                            {file, "bytes, manifest.json says", "truncated", kExpert});
  const ModelSummary s = summarize_model(m.dir);
  size_t bad = 0;
  for (const auto& p : s.shard_problems) bad += !p.empty();
  BOOST_TEST(bad == 1u);
}

BOOST_AUTO_TEST_CASE(missing_shard_file) {
  Model m;
  const std::string file = m.dir + "/" + kExpertShard;
  fs::remove(file);
  auto store = ModelStore::open(m.dir);  // a host may hold a subset: opening is fine
  BOOST_CHECK_NO_THROW(store->tensor("lm_head.weight"));
  expect_error<FormatError>([&] { store->tensor(kExpert); }, {file, "missing", kExpert});
  const VerifyReport r = verify_model(*store, nullptr);
  BOOST_REQUIRE(r.problems.size() == 1u);
  BOOST_TEST(r.problems[0].message.find("missing") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(manifest_disagreeing_with_the_shard) {
  Model m;
  const std::string file = m.dir + "/" + kExpertShard;
  m.edit_manifest([](nlohmann::json& j) { j["tensors"][kExpert]["checksum"] = "xxh64:0000000000000001"; });
  expect_error<FormatError>([&] { ModelStore::open(m.dir)->tensor(kExpert); },
                            {file, kExpert, "checksum attribute"});

  Model m2;
  m2.edit_manifest([](nlohmann::json& j) {
    j["tensors"][kExpert]["offset"] = 4096;
    for (auto& s : j["shards"]) s.erase("metadata_checksum");  // else that check answers first
  });
  expect_error<FormatError>([&] { ModelStore::open(m2.dir)->tensor(kExpert); },
                            {m2.dir + "/" + kExpertShard, kExpert, "offset"});
}

BOOST_AUTO_TEST_CASE(bad_manifests) {
  Model m;
  const std::string mf = m.dir + "/manifest.json";
  const std::vector<uint8_t> bytes = read_bytes(mf);
  const std::string good(bytes.begin(), bytes.end());
  auto restore = [&] { write_text(mf, good); };

  m.edit_manifest([](nlohmann::json& j) { j["tensors"].erase("model.layers.1.mlp.gate.weight"); });
  expect_error<FormatError>([&] { ModelStore::open(m.dir); }, {mf, "model.layers.1.mlp.gate.weight", "missing"});
  restore();
  m.edit_manifest([](nlohmann::json& j) { j["tensors"][kExpert]["shard"] = "nowhere.h5"; });
  expect_error<FormatError>([&] { ModelStore::open(m.dir); }, {mf, kExpert, "nowhere.h5"});
  restore();
  m.edit_manifest([](nlohmann::json& j) { j["tensors"][kExpert]["shape"] = {32, 32}; });
  expect_error<FormatError>([&] { ModelStore::open(m.dir); }, {mf, kExpert, "nbytes"});
  restore();
  m.edit_manifest([](nlohmann::json& j) { j["tensors"][kExpert]["dtype"] = "Q4"; });
  expect_error<FormatError>([&] { ModelStore::open(m.dir); }, {mf, kExpert, "dtype"});
  restore();
  m.edit_manifest([](nlohmann::json& j) { j["format_version"] = 2; });
  expect_error<FormatError>([&] { ModelStore::open(m.dir); }, {mf, "format_version"});
  restore();
  m.edit_manifest([](nlohmann::json& j) { j["weight_format"] = "bf16"; });
  expect_error<FormatError>([&] { ModelStore::open(m.dir); }, {mf, "weight_format"});
  restore();
  // A recorded quantization the converter would refuse (the rule of quantization_path_refused).
  m.edit_manifest([](nlohmann::json& j) {
    j["weight_format"] = "int4";
    j["quantized_from"] = "fp8";
  });
  expect_error<FormatError>([&] { ModelStore::open(m.dir); }, {mf, "quantized_from", "int8 only, not int4"});
  restore();
  m.edit_manifest([](nlohmann::json& j) { j["quantized_from"] = "int8"; });
  expect_error<FormatError>([&] { ModelStore::open(m.dir); }, {mf, "quantized_from", "\"bf16\" or \"fp8\""});
  restore();
  m.edit_manifest([](nlohmann::json& j) { j["shards"][0]["file"] = "../escape.h5"; });
  expect_error<FormatError>([&] { ModelStore::open(m.dir); }, {mf, "file"});
  restore();
  write_text(mf, "{");
  expect_error<FormatError>([&] { ModelStore::open(m.dir); }, {mf, "not valid JSON"});
  fs::remove(mf);
  expect_error<FormatError>([&] { ModelStore::open(m.dir); }, {mf});
  restore();
  BOOST_CHECK_NO_THROW(ModelStore::open(m.dir));
  expect_error<FormatError>([&] { ModelStore::open(m.dir)->tensor("no.such.tensor"); }, {mf, "no.such.tensor"});
}

BOOST_AUTO_TEST_CASE(config_of_the_model_dir) {
  Model m;
  auto c = tiny_config("fp8");
  c.erase("hidden_size");
  write_text(m.dir + "/config.json", c.dump());
  expect_error<ConfigError>([&] { ModelStore::open(m.dir); }, {m.dir + "/config.json", "hidden_size"});
  expect_error<FormatError>([&] { ModelStore::open(m.tmp / "nowhere"); }, {"nowhere", "not a directory"});
}

BOOST_AUTO_TEST_CASE(concurrent_first_use) {
  Model m;
  auto store = ModelStore::open(m.dir);
  const auto& tensors = store->manifest().tensors();
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&, k] {
      for (size_t i = size_t(k); i < tensors.size() + size_t(k); ++i) {
        try {
          const TensorView v = store->tensor(tensors[i % tensors.size()].name);
          if (!v.data) ++failures;
        } catch (...) {
          ++failures;
        }
      }
    });
  for (auto& t : threads) t.join();
  BOOST_TEST(failures.load() == 0);
  BOOST_TEST(store->opened_shards().size() == store->manifest().shards().size());
}
