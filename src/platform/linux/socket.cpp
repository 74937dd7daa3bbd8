#include "platform/socket.hpp"

#include <sys/socket.h>

namespace trillion::platform {

int open_udp_socket() { return ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0); }

}  // namespace trillion::platform
