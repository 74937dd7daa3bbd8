#include "store/shard_layout.hpp"

#include <algorithm>
#include <cstdio>

#include "common/error.hpp"

namespace trillion {

ShardKey shard_for(TensorRole role, int64_t layer, int64_t expert, const ModelConfig& cfg,
                   int64_t experts_per_shard) {
  if (experts_per_shard < 1)
    throw ConfigError("experts per shard must be >= 1, got " + std::to_string(experts_per_shard));
  ShardKey k;
  k.role = role;
  char buf[96];
  switch (role) {
    case TensorRole::embed: k.file = "embed.h5"; return k;
    case TensorRole::head: k.file = "head.h5"; return k;
    case TensorRole::layer:
    case TensorRole::mtp:
      k.layer = layer;
      std::snprintf(buf, sizeof buf, "%s-%03lld.h5", role == TensorRole::layer ? "layer" : "mtp", (long long)layer);
      k.file = buf;
      return k;
    case TensorRole::experts:
    case TensorRole::mtp_experts: break;
  }
  k.layer = layer;
  k.expert_first = expert / experts_per_shard * experts_per_shard;
  // An MTP layer can only have the main layers' experts, but an out-of-range
  // index must still land in a file of its own rather than overflow the name.
  const int64_t n = std::max(cfg.n_routed_experts, expert + 1);
  k.expert_last = std::min(k.expert_first + experts_per_shard, n) - 1;
  const int width = cfg.n_routed_experts > 1000 ? 4 : 3;
  std::snprintf(buf, sizeof buf, "%s-%03lld-experts-%0*lld-%0*lld.h5", role == TensorRole::experts ? "layer" : "mtp",
                (long long)layer, width, (long long)k.expert_first, width, (long long)k.expert_last);
  k.file = buf;
  return k;
}

}  // namespace trillion
