// manifest.json of a converted model, read by Manifest::read. An accepted
// manifest must survive its own round trip (to_json -> from_json), as the
// converter writes it and the loader reads it back.
#include <nlohmann/json.hpp>

#include "fuzz_util.hpp"
#include "store/manifest.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trillion;
  const std::string path = fuzz::write_scratch("manifest.json", fuzz::as_text(data, size));
  fuzz::expect_clean([&] {
    const Manifest m = Manifest::read(path);
    for (const ShardInfo& s : m.shards())
      for (const TensorInfo* t : m.tensors_of(s.file))
        if (m.find_tensor(t->name) != t) __builtin_trap();
    const Manifest again = Manifest::from_json(m.to_json(), "round trip");
    if (again.tensors().size() != m.tensors().size() || again.shards().size() != m.shards().size())
      __builtin_trap();
  });
  return 0;
}
