// Shared by the fuzz targets: a scratch directory per process for the parsers
// that read files (the real code path, not a copy of it), and the rule every
// target checks: a bad input ends in one of trillion's typed errors.
#pragma once
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "common/error.hpp"

namespace trillion::fuzz {

// <tmp>/trillion-fuzz-<pid>, created on first use and removed at exit
// (libFuzzer's -fork/-jobs workers are separate processes: no sharing).
// <tmp> is /dev/shm when there is one: a file per input on a disk made the
// file-reading targets ten times slower.
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    std::error_code ec;
    const auto tmp = std::filesystem::is_directory("/dev/shm", ec) && ::access("/dev/shm", W_OK) == 0
                         ? std::filesystem::path("/dev/shm")
                         : std::filesystem::temp_directory_path();
    auto d = tmp / ("trillion-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    std::atexit([] { std::error_code ec; std::filesystem::remove_all(scratch_dir(), ec); });
    return d;
  }();
  return dir;
}

// Writes `bytes` to scratch_dir()/name (truncating) and returns the path.
inline std::string write_scratch(const std::string& name, std::string_view bytes) {
  const std::string path = (scratch_dir() / name).string();
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(bytes.size()));
  return path;
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Runs `parse`; trillion::Error (and its subclasses) is the expected way for a
// bad input to end. Anything else escapes, and libFuzzer reports the uncaught
// exception as a crash with the input that caused it.
template <class F>
void expect_clean(F&& parse) {
  try {
    parse();
  } catch (const trillion::Error&) {
  }
}

}  // namespace trillion::fuzz
