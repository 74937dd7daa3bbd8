#include "scheduler/scheduler.hpp"

#include <utility>

#include "scheduler/scheduler_run.hpp"

namespace trillion {

Scheduler::Scheduler(StepRunner& runner, const ModelConfig& cfg, SchedulerOptions opts)
    : runner_(runner), cfg_(cfg), opts_(opts) {}

bool Scheduler::run(const std::vector<const GenerateRequest*>& requests,
                    const std::function<void(const GenerationResult&)>& done) {
  SchedulerRun r(runner_, cfg_, opts_, stats_, std::exchange(warmup_slots_, {}), requests, done);
  return r.run();
}

}  // namespace trillion
