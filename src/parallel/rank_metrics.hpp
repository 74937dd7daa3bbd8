// What one rank did during a run, for --metrics: compute time, time waiting
// for peers (the pipeline bubble, expert exchanges), traffic, memory.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace trillion {

struct RankMetrics {
  int rank = 0;
  std::string host;
  std::string role;            // "stage 0: layers 0-13 + embed", "experts 0-31"
  // How its long waits use the core: "poll" (its machine's ranks have a
  // core per thread), "sleep" (they share cores: Backoff's sleep).
  std::string waits;
  double busy_seconds = 0;     // computing (layers, head, experts)
  double wait_seconds = 0;     // blocked on the channel (receive or credits)
  uint64_t bytes_sent = 0, messages_sent = 0;
  uint64_t bytes_received = 0, messages_received = 0;
  int64_t weight_bytes = 0;    // weights this rank maps
  int64_t kv_cache_bytes = 0;
  int64_t peak_rss_bytes = 0;  // getrusage ru_maxrss
  int64_t rss_bytes = 0;       // resident now (a soak watches it stay flat)
  // Its mapped shards (*.h5): resident now, and of that how much sits on
  // 2 MiB pages (format/mapped_file.hpp: decode reads 4 KiB pages slower).
  int64_t weights_resident_bytes = 0;
  int64_t weights_huge_page_bytes = 0;
  // The transport's counters on this rank (MPI_T performance variables
  // btl_tb5_*: frames, retransmissions, injected faults); empty, and left
  // out of the JSON, when btl/tb5 is not loaded.
  std::map<std::string, unsigned long long> transport;
};

int64_t peak_rss_bytes();  // of this process
int64_t rss_bytes();       // of this process, now (0 where the OS does not say)

// One entry of --metrics' "per_rank" (and how it travels to rank 0).
nlohmann::json to_json(const RankMetrics& m);
RankMetrics rank_metrics_from_json(const nlohmann::json& j);

struct ChannelStats;  // runtime/rma_channel.hpp

// Fills the timing, traffic and memory fields common to every rank's role.
void fill_run_metrics(RankMetrics& m, const ChannelStats& traffic, double busy_seconds, double wait_seconds,
                      int64_t kv_cache_bytes);

}  // namespace trillion
