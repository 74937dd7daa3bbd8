// The safetensors reader and the HF checkpoint index: every header lie is a
// FormatError naming the file and, where there is one, the tensor.
#define BOOST_TEST_MODULE safetensors
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <filesystem>

#include "common/error.hpp"
#include "format/hf_checkpoint.hpp"
#include "format/safetensors.hpp"
#include "expect_error.hpp"
#include "synthetic_hf.hpp"

using namespace trillion;
using namespace trillion::test;

namespace {

std::vector<StTensor> two_tensors() {
  return {StTensor{"a.weight", "BF16", {2, 3}, random_bytes(12, 1)},
          StTensor{"b.bias", "F32", {4}, random_bytes(16, 2)}};
}

// A header with hand-written entries over `data_bytes` bytes of data.
void write_with_entries(const std::string& path, const std::string& entries, size_t data_bytes) {
  write_raw_safetensors(path, "{" + entries + "}", random_bytes(data_bytes, 3));
}

}  // namespace

BOOST_AUTO_TEST_CASE(reads_a_valid_file) {
  TempDir tmp;
  const auto tensors = two_tensors();
  write_safetensors(tmp / "m.safetensors", tensors);
  SafetensorsFile f(tmp / "m.safetensors");
  BOOST_TEST(f.tensors().size() == 2u);
  const SafetensorsEntry* a = f.find("a.weight");
  BOOST_REQUIRE(a);
  BOOST_TEST(dtype_name(a->dtype) == std::string("BF16"));
  BOOST_TEST(a->shape == (std::vector<int64_t>{2, 3}));
  BOOST_TEST(a->nbytes() == 12u);
  BOOST_TEST(std::memcmp(f.data(*a), tensors[0].data.data(), 12) == 0);
  const SafetensorsEntry* b = f.find("b.bias");
  BOOST_REQUIRE(b);
  BOOST_TEST(std::memcmp(f.data(*b), tensors[1].data.data(), 16) == 0);
  BOOST_TEST(f.metadata().at("format") == "pt");
  BOOST_TEST(!f.find("c"));
}

BOOST_AUTO_TEST_CASE(truncated_file) {
  TempDir tmp;
  write_text(tmp / "short.safetensors", "abc");
  expect_error<FormatError>([&] { SafetensorsFile f(tmp / "short.safetensors"); }, {tmp / "short.safetensors", "too short"});

  // Valid header, data cut off: the last tensor reaches past the end.
  const auto tensors = two_tensors();
  auto data = safetensors_data(tensors);
  data.resize(data.size() - 5);
  write_raw_safetensors(tmp / "cut.safetensors", safetensors_header(tensors), data);
  expect_error<FormatError>([&] { SafetensorsFile f(tmp / "cut.safetensors"); },
                      {tmp / "cut.safetensors", "b.bias", "past the data section"});
}

BOOST_AUTO_TEST_CASE(header_length_beyond_file) {
  TempDir tmp;
  const auto tensors = two_tensors();
  const std::string header = safetensors_header(tensors);
  write_raw_safetensors(tmp / "x.safetensors", header, safetensors_data(tensors), int64_t(header.size() + 1000));
  expect_error<FormatError>([&] { SafetensorsFile f(tmp / "x.safetensors"); }, {tmp / "x.safetensors", "exceeds the file"});
  write_raw_safetensors(tmp / "huge.safetensors", header, {}, int64_t(1) << 40);
  expect_error<FormatError>([&] { SafetensorsFile f(tmp / "huge.safetensors"); }, {"huge.safetensors", "implausible"});
}

BOOST_AUTO_TEST_CASE(invalid_json) {
  TempDir tmp;
  write_raw_safetensors(tmp / "j.safetensors", "{\"a\": [1, 2", {});
  expect_error<FormatError>([&] { SafetensorsFile f(tmp / "j.safetensors"); }, {"j.safetensors", "not valid JSON"});
  write_raw_safetensors(tmp / "arr.safetensors", "[1, 2]", {});
  expect_error<FormatError>([&] { SafetensorsFile f(tmp / "arr.safetensors"); }, {"arr.safetensors", "not a JSON object"});
}

BOOST_AUTO_TEST_CASE(bad_entries_name_the_tensor) {
  TempDir tmp;
  const std::string p = tmp / "e.safetensors";
  struct Case {
    std::string entries;
    size_t data;
    std::string expect;
  };
  const Case cases[] = {
      {R"("w": {"dtype": "F4", "shape": [2], "data_offsets": [0, 1]})", 1, "unknown dtype 'F4'"},
      {R"("w": {"shape": [2], "data_offsets": [0, 4]})", 4, "dtype"},
      {R"("w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]})", 8, "non-negative"},
      {R"("w": {"dtype": "F32", "shape": [2.5], "data_offsets": [0, 8]})", 8, "non-negative"},
      {R"("w": {"dtype": "F32", "shape": "2", "data_offsets": [0, 8]})", 8, "shape"},
      {R"("w": {"dtype": "F32", "shape": [2], "data_offsets": [0]})", 8, "data_offsets"},
      {R"("w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]})", 8, "end before begin"},
      {R"("w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]})", 8, "needs 12"},
      {R"("w": {"dtype": "F32", "shape": [4611686018427387904, 8], "data_offsets": [0, 8]})", 8, "overflows"},
      {R"("w": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]})", 16, "past the data section"},
      {R"("w": "nope")", 0, "not an object"},
  };
  for (const Case& c : cases) {
    BOOST_TEST_CONTEXT(c.entries) {
      write_with_entries(p, c.entries, c.data);
      expect_error<FormatError>([&] { SafetensorsFile f(p); }, {p, "tensor 'w'", c.expect});
    }
  }
}

BOOST_AUTO_TEST_CASE(offsets_must_tile_the_data) {
  TempDir tmp;
  const std::string p = tmp / "o.safetensors";
  // Overlap: b starts inside a.
  write_with_entries(p,
                     R"("a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
                     R"("b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]})",
                     12);
  expect_error<FormatError>([&] { SafetensorsFile f(p); }, {p, "tensor 'b'", "overlap tensor 'a'"});
  // Hole between a and b.
  write_with_entries(p,
                     R"("a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
                     R"("b": {"dtype": "F32", "shape": [2], "data_offsets": [12, 20]})",
                     20);
  expect_error<FormatError>([&] { SafetensorsFile f(p); }, {p, "tensor 'b'", "hole"});
  // Trailing bytes after the last tensor.
  write_with_entries(p, R"("a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]})", 12);
  expect_error<FormatError>([&] { SafetensorsFile f(p); }, {p, "trailing"});
  // Metadata must map strings to strings.
  write_with_entries(p, R"("__metadata__": {"k": 1}, "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]})",
                     8);
  expect_error<FormatError>([&] { SafetensorsFile f(p); }, {p, "__metadata__"});
}

BOOST_AUTO_TEST_CASE(empty_tensors_and_scalars_are_valid) {
  TempDir tmp;
  write_with_entries(tmp / "s.safetensors",
                     R"("e": {"dtype": "F32", "shape": [0, 4], "data_offsets": [0, 0]},)"
                     R"("s": {"dtype": "I64", "shape": [], "data_offsets": [0, 8]})",
                     8);
  SafetensorsFile f(tmp / "s.safetensors");
  BOOST_TEST(f.find("e")->nbytes() == 0u);
  BOOST_TEST(f.find("s")->nbytes() == 8u);
}

BOOST_AUTO_TEST_CASE(checkpoint_index) {
  TempDir tmp;
  write_synthetic_checkpoint(tmp.path(), tiny_config("bf16"), {.files = 3});
  HfCheckpoint ck(tmp.path());
  BOOST_TEST(ck.files().size() == 3u);
  BOOST_TEST(ck.find("lm_head.weight"));
  BOOST_TEST(!ck.find("nope"));
  BOOST_TEST(ck.warnings().empty());
  BOOST_TEST(std::is_sorted(ck.names().begin(), ck.names().end()));
}

BOOST_AUTO_TEST_CASE(single_file_checkpoint) {
  TempDir tmp;
  write_synthetic_checkpoint(tmp.path(), tiny_config("bf16"), {.files = 1});
  HfCheckpoint ck(tmp.path());
  BOOST_TEST(ck.files().size() == 1u);
  BOOST_TEST(ck.index_path() == tmp / "model.safetensors");
  BOOST_TEST(ck.find("model.embed_tokens.weight"));
}

BOOST_AUTO_TEST_CASE(bad_index) {
  TempDir tmp;
  expect_error<FormatError>([&] { HfCheckpoint ck(tmp.path()); }, {tmp.path(), "model.safetensors.index.json"});

  write_safetensors(tmp / "a.safetensors", two_tensors());
  const std::string index = tmp / "model.safetensors.index.json";
  write_text(index, R"({"weight_map": {"a.weight": "a.safetensors", "c": "missing.safetensors"}})");
  expect_error<FormatError>([&] { HfCheckpoint ck(tmp.path()); }, {index, "missing.safetensors"});

  write_text(index, R"({"weight_map": {"a.weight": "a.safetensors", "zz": "a.safetensors"}})");
  expect_error<FormatError>([&] { HfCheckpoint ck(tmp.path()); }, {index, "'zz'", "a.safetensors"});

  write_text(index, R"({"weight_map": {"a.weight": "../a.safetensors"}})");
  expect_error<FormatError>([&] { HfCheckpoint ck(tmp.path()); }, {index, "not a file name"});

  write_text(index, R"({"weight_map": [1]})");
  expect_error<FormatError>([&] { HfCheckpoint ck(tmp.path()); }, {index, "weight_map"});

  write_text(index, R"({"weight_map": )");
  expect_error<FormatError>([&] { HfCheckpoint ck(tmp.path()); }, {index, "not valid JSON"});

  // A bad header in a file the index names is reported with that file's name.
  write_raw_safetensors(tmp / "a.safetensors", "{", {});
  write_text(index, R"({"weight_map": {"a.weight": "a.safetensors"}})");
  expect_error<FormatError>([&] { HfCheckpoint ck(tmp.path()); }, {tmp / "a.safetensors", "not valid JSON"});
}

BOOST_AUTO_TEST_CASE(index_oddities_are_warnings) {
  TempDir tmp;
  write_safetensors(tmp / "a.safetensors", two_tensors());
  write_text(tmp / "model.safetensors.index.json",
             R"({"metadata": {"total_size": 5}, "weight_map": {"a.weight": "a.safetensors"}})");
  HfCheckpoint ck(tmp.path());
  BOOST_TEST(ck.names().size() == 1u);
  BOOST_REQUIRE(ck.warnings().size() == 2u);
  BOOST_TEST(ck.warnings()[0].find("b.bias") != std::string::npos);
  BOOST_TEST(ck.warnings()[1].find("total_size") != std::string::npos);
}
