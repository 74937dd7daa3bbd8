// Writes NumPy .npy files (format 1.0), for --logits-out and debug dumps.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace trillion {

// Writes float32 array of `shape` (C order) to `path`; throws SystemError.
void write_npy_f32(const std::string& path, const float* data, const std::vector<int64_t>& shape);

}  // namespace trillion

namespace trillion {

// Streams a float32 array of known shape [rows, cols] to disk row block by
// row block, so a [tokens, vocab] logits file never has to sit in memory.
class NpyRowWriter {
 public:
  NpyRowWriter(const std::string& path, int64_t rows, int64_t cols);
  ~NpyRowWriter();
  NpyRowWriter(const NpyRowWriter&) = delete;
  NpyRowWriter& operator=(const NpyRowWriter&) = delete;
  void append(const float* data, int64_t rows);  // rows x cols values
  void close();  // publishes the file; throws if fewer rows than declared were written

 private:
  std::string path_, tmp_;  // tmp_: written, then renamed to path_ by close()
  void* file_ = nullptr;
  int64_t rows_, cols_, written_ = 0;
};

}  // namespace trillion
