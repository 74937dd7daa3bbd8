// Issue 10 item 2 on the weights path: config.json's counts checked against
// the files before the table they size is built.
#define BOOST_TEST_MODULE store_bounds
#include <boost/test/unit_test.hpp>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
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
