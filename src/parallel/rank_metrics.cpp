#include "parallel/rank_metrics.hpp"

#include "format/mapped_pages.hpp"
#include "platform/process_memory.hpp"
#include "runtime/rma_channel.hpp"

namespace trillion {

int64_t peak_rss_bytes() { return platform::peak_resident_bytes(); }

int64_t rss_bytes() { return platform::resident_bytes(); }

nlohmann::json to_json(const RankMetrics& m) {
  nlohmann::json j = {{"rank", m.rank}, {"host", m.host}, {"role", m.role}, {"waits", m.waits}, {"busy_seconds", m.busy_seconds},
          {"wait_seconds", m.wait_seconds}, {"bytes_sent", m.bytes_sent}, {"messages_sent", m.messages_sent},
          {"bytes_received", m.bytes_received}, {"messages_received", m.messages_received},
          {"weight_bytes", m.weight_bytes}, {"kv_cache_bytes", m.kv_cache_bytes},
          {"peak_rss_bytes", m.peak_rss_bytes}, {"rss_bytes", m.rss_bytes},
          {"weights_resident_bytes", m.weights_resident_bytes}, {"weights_huge_page_bytes", m.weights_huge_page_bytes}};
  if (!m.transport.empty()) j["transport"] = m.transport;
  return j;
}

RankMetrics rank_metrics_from_json(const nlohmann::json& j) {
  RankMetrics m;
  j.at("rank").get_to(m.rank);
  j.at("host").get_to(m.host);
  j.at("role").get_to(m.role);
  m.waits = j.value("waits", "");
  j.at("busy_seconds").get_to(m.busy_seconds);
  j.at("wait_seconds").get_to(m.wait_seconds);
  j.at("bytes_sent").get_to(m.bytes_sent);
  j.at("messages_sent").get_to(m.messages_sent);
  j.at("bytes_received").get_to(m.bytes_received);
  j.at("messages_received").get_to(m.messages_received);
  j.at("weight_bytes").get_to(m.weight_bytes);
  j.at("kv_cache_bytes").get_to(m.kv_cache_bytes);
  j.at("peak_rss_bytes").get_to(m.peak_rss_bytes);
  j.at("rss_bytes").get_to(m.rss_bytes);
  j.at("weights_resident_bytes").get_to(m.weights_resident_bytes);
  j.at("weights_huge_page_bytes").get_to(m.weights_huge_page_bytes);
  if (j.contains("transport")) j.at("transport").get_to(m.transport);
  return m;
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
  m.rss_bytes = rss_bytes();
  const MappedPages shards = mapped_pages(".h5");
  m.weights_resident_bytes = shards.resident_bytes;
  m.weights_huge_page_bytes = shards.huge_bytes;
}

}  // namespace trillion
