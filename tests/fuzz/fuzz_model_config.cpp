// config.json of a model, read by ModelConfig::from_file. A config that is
// accepted must give finite derived values (the model uses them unchecked).
#include <cmath>

#include "config/model_config.hpp"
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trillion;
  const std::string path = fuzz::write_scratch("config.json", fuzz::as_text(data, size));
  fuzz::expect_clean([&] {
    const ModelConfig c = ModelConfig::from_file(path);
    (void)std::isfinite(c.softmax_scale());
    for (int64_t layer = 0; layer < std::min<int64_t>(c.num_hidden_layers, 64); ++layer) (void)c.is_moe_layer(layer);
  });
  return 0;
}
