#include "parallel/rank_metrics.hpp"

#include <sys/resource.h>

#include "runtime/rma_channel.hpp"

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

void fill_run_metrics(RankMetrics& m, const ChannelStats& traffic, double busy_seconds, double wait_seconds,
                      int64_t kv_cache_bytes) {
  m.busy_seconds = busy_seconds;
  m.wait_seconds = wait_seconds;
  m.bytes_sent = traffic.bytes_sent;
  m.messages_sent = traffic.messages_sent;
  m.bytes_received = traffic.bytes_received;
  m.messages_received = traffic.messages_received;
  m.kv_cache_bytes = kv_cache_bytes;
  m.peak_rss_bytes = peak_rss_bytes();
}

}  // namespace trillion
