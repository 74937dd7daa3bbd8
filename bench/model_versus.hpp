// bench_model --versus: two models' decode steps taken in turn in one
// process, so that both see the same moment of the machine.
//
// Why: this VM's read rate moves by a third within minutes, and two models
// benched one after the other (or in alternated processes, as run_all.py
// did for FP8 against INT8) measured 0.80-1.31x of each other at the same
// batch on the same kernels and bytes. A ratio per pair of adjacent steps
// cancels the drift; their median and quartiles say what is left.
#pragma once
#include <vector>

#include <nlohmann/json.hpp>

#include "model_step.hpp"

namespace trillion::bench {

// At each batch: `context` prompt tokens per sequence for each model (not
// timed), then `steps` greedy decode steps of each, in turn (the order
// swapped every pair). Per batch: each model's median tokens/s and the
// median and quartiles of a's rate over b's, pair by pair, and each one's
// weight MB per step (two models route their tokens differently, so a step
// of each need not stream as many experts).
// phases: both models time their steps by phase (Bench::time_phases); each
// phase's mean per model is printed and kept.
nlohmann::json decode_versus(LoadedModel& a, LoadedModel& b, const std::vector<int>& batches, int context,
                             int steps, bool phases);

}  // namespace trillion::bench
