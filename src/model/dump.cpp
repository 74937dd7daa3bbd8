#include "model/dump.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "common/error.hpp"
#include "common/npy.hpp"

namespace trillion {

Dumper::Dumper() {
  if (const char* dir = std::getenv("TRILLION_DUMP")) dir_ = dir;
}

void Dumper::dump(int64_t layer, const std::string& name, const float* data, std::vector<int64_t> shape) const {
  if (!enabled()) return;
  char step[32], who[32];
  std::snprintf(step, sizeof step, "step-%05lld", static_cast<long long>(step_));
  if (layer >= 0)
    std::snprintf(who, sizeof who, "layer-%03lld", static_cast<long long>(layer));
  else
    std::snprintf(who, sizeof who, "model");
  const std::filesystem::path dir = std::filesystem::path(dir_) / step;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw SystemError(dir.string() + ": cannot create (TRILLION_DUMP): " + ec.message());
  write_npy_f32((dir / (std::string(who) + "." + name + ".npy")).string(), data, shape);
}

}  // namespace trillion
