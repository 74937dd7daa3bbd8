// Writes NumPy .npy files (format 1.0), for --logits-out and debug dumps.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace trillion {

// Writes float32 array of `shape` (C order) to `path`; throws SystemError.
void write_npy_f32(const std::string& path, const float* data, const std::vector<int64_t>& shape);

}  // namespace trillion
