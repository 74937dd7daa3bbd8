#include "common/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/error.hpp"
#include "platform/file_sync.hpp"

namespace trillion {

std::string temp_path_for(const std::string& path) { return path + ".partial-" + std::to_string(::getpid()); }

void* create_temp_file(const std::string& tmp) {
  ::unlink(tmp.c_str());  // only a dead process of our pid can have left it
  // O_EXCL: never write through a symlink or into someone else's file.
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw SystemError(tmp + ": cannot create: " + std::strerror(errno));
  std::FILE* f = ::fdopen(fd, "wb");
  if (!f) {
    const int e = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    throw SystemError(tmp + ": cannot open: " + std::strerror(e));
  }
  return f;
}

void publish_temp_file(void* file, const std::string& tmp, const std::string& path) {
  std::FILE* f = static_cast<std::FILE*>(file);
  // The data is on disk before the name points at it.
  bool ok = std::fflush(f) == 0 && platform::sync_file(::fileno(f));
  int e = ok ? 0 : errno;
  if (std::fclose(f) != 0 && ok) ok = false, e = errno;
  if (ok && std::rename(tmp.c_str(), path.c_str()) != 0) ok = false, e = errno;
  if (ok) return;
  ::unlink(tmp.c_str());
  throw SystemError(path + ": cannot write: " + std::strerror(e));
}

void write_file_atomically(const std::string& path, const std::string& contents) {
  const std::string tmp = temp_path_for(path);
  void* f = create_temp_file(tmp);
  if (std::fwrite(contents.data(), 1, contents.size(), static_cast<std::FILE*>(f)) != contents.size()) {
    const int e = errno;
    std::fclose(static_cast<std::FILE*>(f));
    ::unlink(tmp.c_str());
    throw SystemError(tmp + ": cannot write: " + std::strerror(e));
  }
  publish_temp_file(f, tmp, path);
}

}  // namespace trillion
