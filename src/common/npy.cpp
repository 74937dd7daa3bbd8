#include "common/npy.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/error.hpp"

namespace trillion {

void write_npy_f32(const std::string& path, const float* data, const std::vector<int64_t>& shape) {
  std::string dims;
  int64_t count = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    dims += std::to_string(shape[i]);
    if (shape.size() == 1 || i + 1 < shape.size()) dims += ",";
    if (i + 1 < shape.size()) dims += " ";
    count *= shape[i];
  }
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Magic (6) + version (2) + header length (2) + header + '\n', padded to 64 bytes.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw SystemError(path + ": cannot create: " + std::strerror(errno));
  const unsigned char magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  const uint16_t hlen = uint16_t(header.size());
  bool ok = std::fwrite(magic, 1, 8, f) == 8;
  ok = ok && std::fwrite(&hlen, 2, 1, f) == 1;  // little-endian host assumed (x86-64, arm64)
  ok = ok && std::fwrite(header.data(), 1, header.size(), f) == header.size();
  ok = ok && (count == 0 || std::fwrite(data, sizeof(float), size_t(count), f) == size_t(count));
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) throw SystemError(path + ": write failed: " + std::strerror(errno));
}

}  // namespace trillion
