// What a parallel mode asks of a run beyond who holds what (plan/layout.hpp):
// how many slots a rank's KV pool holds, the run-shape limits of the mode,
// and the figures --metrics reports for it. The commands ask these questions
// of a Layout and never name a mode, so a new mode is its layout, its cost
// (plan/predict.cpp), its roles (rank_role.cpp) and its cases here.
#pragma once
#include <cstdint>

#include "parallel/run_shape.hpp"
#include "plan/layout.hpp"

namespace trillion {

// The slots a rank's KV pool is sized for (run_footprint's pool_slots): a
// pipeline stage caches every sequence (for its layers); an expert-parallel
// rank serves its own sequences, so its pool holds its share
// (KvPools::sized_slots).
int32_t pool_slots(const Layout& layout, int32_t slots);

// The limits of the layout's mode on the run's shape; throws InputError
// naming the flag (expert mode: --micro-batches splits a rank's rows into at
// most 64 groups).
void check_mode_shape(const Layout& layout, const RunShape& shape);

// The row groups a rank's step is split into at most at the MoE layers
// (expert parallel over 2 or more ranks, config/row_groups.hpp); 0 when the
// run does not group rows (--metrics leaves "row_groups" out).
int row_groups(const Layout& layout, const RunShape& shape);

}  // namespace trillion
