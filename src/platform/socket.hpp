// Sockets as tb5's udp backend and verbs simulator use them.
#pragma once

namespace trillion::platform {

// A new IPv4 UDP socket, non-blocking and closed on exec; -1 with errno set
// on failure. Linux sets both flags in socket(2) (SOCK_NONBLOCK,
// SOCK_CLOEXEC); macOS has neither and sets them with fcntl right after
// (a fork-and-exec between the two calls, from another thread, could
// inherit it: nothing here forks).
int open_udp_socket();

}  // namespace trillion::platform
