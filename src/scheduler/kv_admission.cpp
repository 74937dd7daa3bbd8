#include "scheduler/kv_admission.hpp"

#include <string>
#include <variant>

namespace trillion {

void reject_unfittable(std::vector<Parsed<GenerateRequest>>& requests, int64_t max_len, const KvPools& pools) {
  for (auto& p : requests) {
    auto* r = std::get_if<GenerateRequest>(&p);
    if (!r || r->max_tokens == 0) continue;
    const int64_t positions = kv_positions(*r, max_len);
    if (!pools.fits_empty(positions))
      p = RequestError{r->line, r->id,
                       "prompt + max_tokens need " + std::to_string(positions) +
                           " KV-cache positions, more than the pool's " + std::to_string(pools.pool_positions()) +
                           " (raise --kv-cache-tokens or lower max_tokens)",
                       r->form, true};
  }
}

}  // namespace trillion
