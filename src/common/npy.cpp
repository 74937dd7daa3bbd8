#include "common/npy.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/atomic_file.hpp"
#include "common/error.hpp"

namespace trillion {

namespace {

std::string npy_header(const std::vector<int64_t>& shape) {
  std::string dims;
  for (size_t i = 0; i < shape.size(); ++i) {
    dims += std::to_string(shape[i]);
    if (shape.size() == 1 || i + 1 < shape.size()) dims += ",";
    if (i + 1 < shape.size()) dims += " ";
  }
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Magic (6) + version (2) + header length (2) + header + '\n', padded to 64 bytes.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  return header;
}

bool write_header(std::FILE* f, const std::string& header) {
  const unsigned char magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  const uint16_t hlen = uint16_t(header.size());
  bool ok = std::fwrite(magic, 1, 8, f) == 8;
  ok = ok && std::fwrite(&hlen, 2, 1, f) == 1;  // little-endian host assumed (x86-64, arm64)
  return ok && std::fwrite(header.data(), 1, header.size(), f) == header.size();
}

}  // namespace

void write_npy_f32(const std::string& path, const float* data, const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  const std::string header = npy_header(shape);
  const std::string tmp = temp_path_for(path);
  std::FILE* f = static_cast<std::FILE*>(create_temp_file(tmp));
  bool ok = write_header(f, header);
  ok = ok && (count == 0 || std::fwrite(data, sizeof(float), size_t(count), f) == size_t(count));
  if (!ok) {
    const int e = errno;
    std::fclose(f);
    std::remove(tmp.c_str());
    throw SystemError(path + ": write failed: " + std::strerror(e));
  }
  publish_temp_file(f, tmp, path);
}

// Rows go to a file of this process's own beside `path`, renamed to `path`
// by close(): a logits file that exists is complete (a run killed midway
// leaves no torn .npy that a reader or a resumed run would take as whole).
NpyRowWriter::NpyRowWriter(const std::string& path, int64_t rows, int64_t cols)
    : path_(path), tmp_(temp_path_for(path)), rows_(rows), cols_(cols) {
  std::FILE* f = static_cast<std::FILE*>(create_temp_file(tmp_));
  file_ = f;
  if (!write_header(f, npy_header({rows, cols})))
    throw SystemError(path + ": write failed: " + std::strerror(errno));
}

NpyRowWriter::~NpyRowWriter() {
  if (!file_) return;
  std::fclose(static_cast<std::FILE*>(file_));  // never closed: an error or unwinding
  std::remove(tmp_.c_str());
}

void NpyRowWriter::append(const float* data, int64_t rows) {
  if (written_ + rows > rows_) throw Error(path_ + ": more rows than declared");
  const size_t count = size_t(rows * cols_);
  if (count && std::fwrite(data, sizeof(float), count, static_cast<std::FILE*>(file_)) != count)
    throw SystemError(path_ + ": write failed: " + std::strerror(errno));
  written_ += rows;
}

void NpyRowWriter::close() {
  if (written_ != rows_)  // the destructor removes the incomplete file
    throw Error(path_ + ": " + std::to_string(written_) + " rows written of " + std::to_string(rows_));
  void* f = file_;
  file_ = nullptr;
  publish_temp_file(f, tmp_, path_);
}

}  // namespace trillion
