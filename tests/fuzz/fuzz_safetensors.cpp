// A .safetensors file: the u64 header length, the JSON header and the data
// section, opened through SafetensorsFile as the converter opens it. A file
// that opens must keep every tensor inside the data section.
#include "format/safetensors.hpp"
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trillion;
  const std::string path = fuzz::write_scratch("model.safetensors", fuzz::as_text(data, size));
  fuzz::expect_clean([&] {
    SafetensorsFile f(path);
    for (const SafetensorsEntry& t : f.tensors()) {
      if (t.begin < f.data_start() || t.end < t.begin || t.end > f.file_size()) __builtin_trap();
      if (f.find(t.name) == nullptr) __builtin_trap();
    }
  });
  return 0;
}
