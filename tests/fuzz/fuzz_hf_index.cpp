// model.safetensors.index.json of a Hugging Face checkpoint, read by
// HfCheckpoint beside two fixed, valid safetensors files (a.safetensors: w1,
// w2; b.safetensors: w3), so the fuzzer explores the index, not the files.
#include <filesystem>

#include "format/hf_checkpoint.hpp"
#include "fuzz_util.hpp"

namespace {

// One F32 tensor of `n` elements per entry, laid out back to back.
std::string safetensors_bytes(const std::vector<std::pair<std::string, int>>& tensors) {
  std::string header = "{", body;
  for (const auto& [name, n] : tensors) {
    const size_t begin = body.size();
    body.append(size_t(n) * 4, '\x01');
    if (header.size() > 1) header += ",";
    header += "\"" + name + "\":{\"dtype\":\"F32\",\"shape\":[" + std::to_string(n) + "],\"data_offsets\":[" +
              std::to_string(begin) + "," + std::to_string(body.size()) + "]}";
  }
  header += "}";
  std::string out(8, '\0');
  const uint64_t len = header.size();
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char(len >> (8 * i) & 0xff);
  return out + header + body;
}

const std::filesystem::path& checkpoint_dir() {
  static const std::filesystem::path dir = [] {
    auto d = trillion::fuzz::scratch_dir() / "hf";
    std::filesystem::create_directories(d);
    trillion::fuzz::write_scratch("hf/a.safetensors", safetensors_bytes({{"w1", 2}, {"w2", 3}}));
    trillion::fuzz::write_scratch("hf/b.safetensors", safetensors_bytes({{"w3", 4}}));
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trillion;
  const auto& dir = checkpoint_dir();
  fuzz::write_scratch("hf/model.safetensors.index.json", fuzz::as_text(data, size));
  fuzz::expect_clean([&] {
    HfCheckpoint ck(dir.string());
    for (const std::string& name : ck.names()) {
      const HfCheckpoint::Tensor* t = ck.find(name);
      if (!t || !t->file || !t->entry || t->entry->end > t->file->file_size()) __builtin_trap();
    }
  });
  return 0;
}
