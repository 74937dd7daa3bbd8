// A tiny safetensors writer for tests, so store tests need no Python. It can
// also write deliberately broken files (any header text, any length field).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace trillion::test {

struct StTensor {
  std::string name;
  std::string dtype;           // safetensors spelling; unknown ones allowed (bad-input tests)
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

// A valid file: tensors laid out in the given order, contiguous.
void write_safetensors(const std::string& path, const std::vector<StTensor>& tensors);

// The header JSON write_safetensors would produce, and the data section.
std::string safetensors_header(const std::vector<StTensor>& tensors);
std::vector<uint8_t> safetensors_data(const std::vector<StTensor>& tensors);

// Raw: u64 length field (header.size() unless overridden), header text, data.
void write_raw_safetensors(const std::string& path, const std::string& header, const std::vector<uint8_t>& data,
                           int64_t length_field = -1);

// Deterministic pseudo-random bytes (splitmix64 of seed).
std::vector<uint8_t> random_bytes(size_t n, uint64_t seed);

void write_text(const std::string& path, const std::string& text);
std::vector<uint8_t> read_bytes(const std::string& path);

}  // namespace trillion::test
