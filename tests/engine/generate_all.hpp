// Test helper: every request through one Generator run; results by id.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "engine/generator.hpp"

namespace trillion::test {

inline std::map<std::string, GenerationResult> generate_all(StepRunner& runner, const ModelConfig& cfg,
                                                            const GeneratorOptions& opts,
                                                            const std::vector<GenerateRequest>& reqs) {
  std::vector<const GenerateRequest*> ptrs;
  for (auto& r : reqs) ptrs.push_back(&r);
  Generator gen(runner, cfg, opts);
  std::map<std::string, GenerationResult> got;
  gen.run(ptrs, [&](const GenerationResult& r) { got[r.request->id] = r; });
  return got;
}

}  // namespace trillion::test
