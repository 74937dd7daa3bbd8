#include "platform/file_sync.hpp"

#include <unistd.h>

namespace trillion::platform {

bool sync_file(int fd) { return ::fsync(fd) == 0; }

bool sync_file_data(int fd) { return ::fdatasync(fd) == 0; }

}  // namespace trillion::platform
