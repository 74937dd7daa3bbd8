#include "parallel/rank_metrics.hpp"

#include <sys/resource.h>

namespace trillion {

int64_t peak_rss_bytes() {
  struct rusage u {};
  getrusage(RUSAGE_SELF, &u);
#ifdef __APPLE__
  return int64_t(u.ru_maxrss);  // bytes on macOS
#else
  return int64_t(u.ru_maxrss) * 1024;  // kilobytes on Linux
#endif
}

}  // namespace trillion
