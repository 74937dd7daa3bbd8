#include "platform/process_memory.hpp"

#include <mach/mach.h>
#include <sys/resource.h>
#include <sys/sysctl.h>

namespace trillion::platform {

int64_t resident_bytes() {
  mach_task_basic_info_data_t info{};
  mach_msg_type_number_t count = MACH_TASK_BASIC_INFO_COUNT;
  if (task_info(mach_task_self(), MACH_TASK_BASIC_INFO, task_info_t(&info), &count) != KERN_SUCCESS) return 0;
  return int64_t(info.resident_size);
}

int64_t peak_resident_bytes() {
  struct rusage u {};
  getrusage(RUSAGE_SELF, &u);
  return int64_t(u.ru_maxrss);  // bytes
}

int64_t physical_memory_bytes() {
  uint64_t bytes = 0;
  size_t len = sizeof bytes;
  return sysctlbyname("hw.memsize", &bytes, &len, nullptr, 0) == 0 ? int64_t(bytes) : 0;
}

}  // namespace trillion::platform
