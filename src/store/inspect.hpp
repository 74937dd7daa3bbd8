// `trillion inspect`: what a converted model is (config summary, parameter
// counts, bytes per dtype and role, shard files) and, with --verify, whether
// every byte still matches its checksum.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/manifest.hpp"
#include "store/model_store.hpp"

namespace trillion {

// Parameters are logical weights (int4 counts the unpacked [out, in]; scales
// are not parameters). Active per token: everything a token's forward pass
// multiplies — attention, norms, dense MLPs, routers, shared experts,
// num_experts_per_tok of the n_routed_experts routed experts of each MoE
// layer, final norm, lm_head — but not the embedding table (a token reads one
// row of it) and not the MTP layers (unused by the forward pass).
struct ParameterCounts {
  int64_t total = 0;   // embedding + layers + head
  int64_t active = 0;  // per token, as defined above
  int64_t mtp = 0;     // multi-token-prediction layers, not in total
};
ParameterCounts count_parameters(const Manifest& m, const ModelConfig& cfg);
extern const char* const kActiveDefinition;  // the definition above, for the output

struct ModelSummary {
  std::unique_ptr<ModelStore> store;  // config + manifest, no shard mapped
  ParameterCounts params;
  std::map<std::string, uint64_t> bytes_by_dtype;
  std::map<std::string, uint64_t> bytes_by_role;
  std::vector<std::string> shard_problems;  // per manifest shard: "" or missing / wrong size
  nlohmann::json quantization;  // "overall" of quantization.json (quantized models), else null
};

// Throws FormatError/ConfigError naming the file when config.json or
// manifest.json cannot be read; missing shard files are listed, not errors.
ModelSummary summarize_model(const std::string& dir);
void print_summary(std::ostream& out, const ModelSummary& s);
nlohmann::json summary_json(const ModelSummary& s);

struct VerifyProblem {
  std::string file;
  std::string tensor;  // empty: the whole file
  std::string message;
};

struct VerifyReport {
  int64_t tensors = 0;  // hashed and matching
  uint64_t bytes = 0;   // hashed
  double seconds = 0;
  std::vector<VerifyProblem> problems;
  bool ok() const { return problems.empty(); }
};

// Re-reads every shard: size, HDF5 structure, every dataset, every checksum.
// Reports each mismatch by file and tensor and goes on. Progress on `progress`.
VerifyReport verify_model(const ModelStore& store, std::ostream* progress);
void print_verify(std::ostream& out, const VerifyReport& r);
nlohmann::json verify_json(const VerifyReport& r);

}  // namespace trillion
