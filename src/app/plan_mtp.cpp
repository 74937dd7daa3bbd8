#include "app/plan_mtp.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

#include "store/manifest.hpp"

namespace trillion::app {

nlohmann::json mtp_footprint(const ModelConfig& cfg, const Manifest& man, const RankShare& share,
                             int64_t kv_per_layer) {
  const bool here = share.layers.has_head && has_mtp_layer(cfg, man);
  return {{"weight_bytes", here ? share_mtp_bytes(cfg, man, share) : 0},
          {"kv_cache_bytes", here ? kv_per_layer : 0},
          {"files", here ? share_mtp_files(cfg, man, share) : std::vector<std::string>{}}};
}

void print_mtp_footprint(const nlohmann::json& per_rank) {
  std::string ranks;
  int64_t weights = 0, kv = 0;
  std::string files;
  for (const auto& r : per_rank) {
    const int64_t w = r["mtp"]["weight_bytes"].get<int64_t>();
    if (w == 0) continue;
    if (!ranks.empty()) ranks += ',';
    ranks += std::to_string(r["rank"].get<int>());
    weights = w;
    kv = std::max(kv, r["mtp"]["kv_cache_bytes"].get<int64_t>());
    files.clear();
    for (const auto& f : r["mtp"]["files"]) {
      files += ' ';
      files += f.get<std::string>();
    }
  }
  if (ranks.empty()) return;
  const bool one = ranks.find(',') == std::string::npos;
  std::printf("with --speculative mtp, rank%s %s also hold%s the MTP layer: %.3f GiB of weights (mapped) + "
              "up to %.3f GiB of KV cache each, and need%s%s\n",
              one ? "" : "s", ranks.c_str(), one ? "s" : "", double(weights) / (1 << 30), double(kv) / (1 << 30),
              one ? "s" : "", files.c_str());
}

}  // namespace trillion::app
