#include "parallel/mode_rules.hpp"

#include <string>

#include "common/error.hpp"
#include "model/kv_pools.hpp"
#include "parallel/expert.hpp"

namespace trillion {

int32_t pool_slots(const Layout& layout, int32_t slots) {
  return layout.mode == ParallelMode::expert ? KvPools::sized_slots(slots, layout.size()) : slots;
}

void check_mode_shape(const Layout& layout, const RunShape& shape) {
  // The MoE layer marks the groups that have rows in a 64-bit mask (model/moe.cpp).
  if (layout.mode == ParallelMode::expert && shape.micro_batches > 64)
    throw InputError("--micro-batches " + std::to_string(shape.micro_batches) +
                     ": expert mode splits a rank's rows into at most 64 groups");
}

int row_groups(const Layout& layout, const RunShape& shape) {
  if (layout.mode != ParallelMode::expert || layout.size() < 2) return 0;
  return expert_groups(shape);
}

}  // namespace trillion
