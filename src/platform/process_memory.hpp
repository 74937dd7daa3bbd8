// This process's memory and the machine's, as each operating system counts it.
#pragma once
#include <cstdint>

namespace trillion::platform {

// Resident bytes now, file-backed pages (mapped weights) included (Linux:
// /proc/self/statm; macOS: task_info's resident_size). 0 when unknown.
int64_t resident_bytes();

// The most resident bytes so far (getrusage's ru_maxrss, which Linux gives
// in KiB and macOS in bytes).
int64_t peak_resident_bytes();

// The machine's physical memory (Linux: sysconf _SC_PHYS_PAGES x
// _SC_PAGESIZE; macOS: sysctl hw.memsize). 0 when unknown.
int64_t physical_memory_bytes();

}  // namespace trillion::platform
