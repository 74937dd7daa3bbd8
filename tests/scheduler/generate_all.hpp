// Test helper: every request through one Scheduler run; results by id.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "scheduler/scheduler.hpp"

namespace trillion::test {

inline std::map<std::string, GenerationResult> generate_all(StepRunner& runner, const ModelConfig& cfg,
                                                            const SchedulerOptions& opts,
                                                            const std::vector<GenerateRequest>& reqs) {
  std::vector<const GenerateRequest*> ptrs;
  for (auto& r : reqs) ptrs.push_back(&r);
  Scheduler gen(runner, cfg, opts);
  std::map<std::string, GenerationResult> got;
  gen.run(ptrs, [&](const GenerationResult& r) { got[r.request->id] = r; });
  return got;
}

}  // namespace trillion::test
