#include "store/staging_dir.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>

#include "common/error.hpp"
#include "platform/file_sync.hpp"

namespace trillion {

namespace fs = std::filesystem;

namespace {

// Present only in directories this code created, so a stale one can be
// removed without risking a user's directory that happens to share the name.
constexpr const char* kMarker = ".trillion-partial";

void sync_dir(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    platform::sync_file(fd);  // best effort: makes the rename durable
    ::close(fd);
  }
}

// The pid a marker names when that process still runs (not this one), else
// 0: a staging directory is removed only when its writer has ended, so two
// converts to one output cannot delete each other's shards midway.
long writer_pid(const fs::path& marker) {
  std::ifstream in(marker);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  const size_t at = text.find("pid ");
  if (at == std::string::npos) return 0;  // written before markers named their pid
  const long pid = std::strtol(text.c_str() + at + 4, nullptr, 10);
  if (pid <= 0 || pid == long(::getpid())) return 0;
  return ::kill(pid_t(pid), 0) == 0 || errno == EPERM ? pid : 0;
}

}  // namespace

StagingDir::StagingDir(const std::string& output, bool force, std::ostream* log) {
  fs::path out = fs::absolute(output).lexically_normal();
  if (out.has_filename() == false) out = out.parent_path();  // "dir/" -> "dir"
  output_ = out.string();
  partial_ = output_ + ".partial";

  std::error_code ec;
  if (fs::exists(out)) {
    if (!fs::is_directory(out)) throw InputError(output_ + ": exists and is not a directory");
    if (!fs::is_empty(out)) {
      if (!fs::exists(out / "manifest.json"))
        throw InputError(output_ + ": exists, is not empty and is not a trillion model; refusing to replace it");
      if (!force) throw InputError(output_ + ": a converted model already exists (use --force to replace it)");
    }
  }
  if (fs::exists(partial_)) {
    if (!fs::exists(fs::path(partial_) / kMarker))
      throw InputError(partial_ + ": exists and was not created by trillion convert; remove it or choose another output");
    if (const long pid = writer_pid(fs::path(partial_) / kMarker); pid > 0)
      throw InputError(partial_ + ": another trillion convert (pid " + std::to_string(pid) +
                       ") is writing it; wait for it to end, or remove the directory if that process is not a convert");
    if (log) *log << "convert: removing " << partial_ << " left by an interrupted conversion\n";
    fs::remove_all(partial_, ec);
    if (ec) throw SystemError(partial_ + ": cannot remove: " + ec.message());
  }
  fs::create_directories(out.parent_path(), ec);
  if (ec) throw SystemError(out.parent_path().string() + ": cannot create: " + ec.message());
  if (!fs::create_directory(partial_, ec) || ec)
    throw SystemError(partial_ + ": cannot create: " + (ec ? ec.message() : "exists"));
  std::ofstream(fs::path(partial_) / kMarker) << "trillion convert in progress, pid " << ::getpid()
                                              << "; safe to delete once that process has ended\n";
}

StagingDir::~StagingDir() {
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(partial_, ec);  // nothing sensible to do on failure while unwinding
}

void StagingDir::commit() {
  std::error_code ec;
  fs::remove(fs::path(partial_) / kMarker, ec);
  // The model being replaced moves aside under a name nobody else uses, and
  // is deleted only once the new one is in place.
  const std::string old = output_ + ".replaced-" + std::to_string(::getpid());
  bool replaced = false;
  if (fs::exists(output_) && !fs::is_empty(output_)) {
    if (fs::exists(old)) throw SystemError(old + ": exists; remove it and run again");
    fs::rename(output_, old, ec);
    if (ec) throw SystemError(output_ + ": cannot move aside to replace it: " + ec.message());
    replaced = true;
  } else if (fs::exists(output_)) {
    fs::remove(output_, ec);  // an empty directory the user made for us
  }
  fs::rename(partial_, output_, ec);
  if (ec) {
    if (replaced) fs::rename(old, output_, ec);
    throw SystemError(partial_ + ": cannot rename to " + output_ + ": " + ec.message());
  }
  committed_ = true;
  sync_dir(fs::path(output_).parent_path());
  if (replaced) fs::remove_all(old, ec);
}

}  // namespace trillion
