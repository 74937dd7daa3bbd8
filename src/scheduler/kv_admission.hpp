// KV-cache admission, in one place: what a request may fill of a pool, the
// pass that turns requests no pool could ever hold into errors before a run,
// and the scheduler's own check at admission (scheduler.cpp), which fails a
// request that slipped through instead of the job.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "model/kv_pools.hpp"
#include "requests/request.hpp"

namespace trillion {

// KV-cache positions a request may fill: its prompt and max_tokens, capped
// at the context (the scheduler reserves them at admission).
inline int64_t kv_positions(const GenerateRequest& r, int64_t max_len) {
  // max_tokens may be anything up to INT64_MAX: cap it before adding.
  return std::min<int64_t>(int64_t(r.prompt_token_ids.size()) + std::min(r.max_tokens, max_len), max_len);
}

// Marks requests that need more KV-cache blocks than a pool holds (they
// could never be admitted) as errors naming the flag that would make room.
void reject_unfittable(std::vector<Parsed<GenerateRequest>>& requests, int64_t max_len, const KvPools& pools);

}  // namespace trillion
