#include "platform/file_sync.hpp"

#include <fcntl.h>
#include <unistd.h>

namespace trillion::platform {

bool sync_file(int fd) {
  // Some filesystems (network, FAT, a directory on some) refuse F_FULLFSYNC:
  // fsync is then the most there is.
  return ::fcntl(fd, F_FULLFSYNC) == 0 || ::fsync(fd) == 0;
}

bool sync_file_data(int fd) { return sync_file(fd); }

}  // namespace trillion::platform
