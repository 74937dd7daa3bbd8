// The text form of `trillion plan`: who holds what, memory per host against
// what it has, files per host, predicted tokens/s (from the JSON form, so
// both say the same).
#pragma once
#include <nlohmann/json.hpp>

namespace trillion::app {

struct PlanReport {
  nlohmann::json json;  // what --json prints
};

void print_plan(const PlanReport& rep, bool int8_copies);

}  // namespace trillion::app
