#include "st_writer.hpp"

#include <fstream>
#include <iterator>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace trillion::test {

std::string safetensors_header(const std::vector<StTensor>& tensors) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  h["__metadata__"] = {{"format", "pt"}};
  uint64_t pos = 0;
  for (const StTensor& t : tensors) {
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {pos, pos + t.data.size()}}};
    pos += t.data.size();
  }
  std::string s = h.dump();
  while (s.size() % 8) s += ' ';  // as the reference writer pads
  return s;
}

std::vector<uint8_t> safetensors_data(const std::vector<StTensor>& tensors) {
  std::vector<uint8_t> d;
  for (const StTensor& t : tensors) d.insert(d.end(), t.data.begin(), t.data.end());
  return d;
}

void write_raw_safetensors(const std::string& path, const std::string& header, const std::vector<uint8_t>& data,
                           int64_t length_field) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  uint64_t n = length_field < 0 ? header.size() : uint64_t(length_field);
  out.write(reinterpret_cast<const char*>(&n), 8);
  out.write(header.data(), std::streamsize(header.size()));
  out.write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

void write_safetensors(const std::string& path, const std::vector<StTensor>& tensors) {
  write_raw_safetensors(path, safetensors_header(tensors), safetensors_data(tensors));
}

std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  std::vector<uint8_t> out(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; i += 8) {
    uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    for (size_t j = 0; j < 8 && i + j < n; ++j) out[i + j] = uint8_t(z >> (8 * j));
  }
  return out;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path);
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

}  // namespace trillion::test
