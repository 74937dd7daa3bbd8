#include "app/plan_report.hpp"

#include <cstdio>
#include <string>

namespace trillion::app {
namespace {

std::string gib(double b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", b / double(1ll << 30));
  return buf;
}

std::string range(const nlohmann::json& r) {
  return std::to_string(r[0].get<int>()) + "-" + std::to_string(r[1].get<int>());
}

}  // namespace

void print_plan(const PlanReport& rep, bool int8_copies) {
  const auto& j = rep.json;
  std::printf("%s: %s, %s weights; %s over %d rank%s, compute path %s\n", j["model"].get<std::string>().c_str(),
              j["model_type"].get<std::string>().c_str(), j["weight_format"].get<std::string>().c_str(),
              j["parallel"].get<std::string>().c_str(), j["ranks"].get<int>(), j["ranks"].get<int>() > 1 ? "s" : "",
              j["activations"].get<std::string>().c_str());
  // Why this path (auto weighs the hosts' memory and kernels for FP8).
  if (j.contains("activations_reason"))
    std::printf("compute path %s: %s\n", j["activations"].get<std::string>().c_str(),
                j["activations_reason"].get<std::string>().c_str());
  if (int8_copies)
    std::printf("FP8 weights on the int8 path: each rank also holds its FP8 linears as int8 groups (\"int8 copy\")\n");
  // A split head shows each stage's lm_head rows.
  const bool split = j.contains("head_split") && j["head_split"].get<int64_t>() > 0;
  std::printf("\n%-5s %-10s %-8s %-6s %-*s %-9s %-12s %-12s %-12s %-12s %s\n", "rank", "host", "layers", "embed",
              split ? 13 : 5, split ? "head rows" : "head", "experts", "weights", "int8 copy", "kv cache", "working",
              "files");
  for (const auto& r : j["per_rank"]) {
    const auto& hr = r["head_rows"];
    const std::string head = !split ? (r["head"].get<bool>() ? "yes" : "")
                             : hr[1].get<int64_t>() > hr[0].get<int64_t>()
                                 ? std::to_string(hr[0].get<int64_t>()) + "-" + std::to_string(hr[1].get<int64_t>() - 1)
                                 : "";
    std::printf("%-5d %-10s %-8s %-6s %-*s %-9s %-12s %-12s %-12s %-12s %zu\n", r["rank"].get<int>(),
                r["host"].get<std::string>().c_str(), range(r["layers"]).c_str(), r["embed"].get<bool>() ? "yes" : "",
                split ? 13 : 5, head.c_str(), range(r["experts"]).c_str(),
                gib(r["weight_bytes"].get<double>()).c_str(), gib(r["int8_copy_bytes"].get<double>()).c_str(),
                gib(r["kv_cache_bytes"].get<double>()).c_str(), gib(r["working_bytes"].get<double>()).c_str(),
                r["files"].size());
  }
  std::printf("\nmemory per host (weights + int8 copy + KV cache + working memory):\n");
  for (const auto& h : j["per_host"]) {
    std::printf("  %-10s needs %s of %s", h["host"].get<std::string>().c_str(),
                gib(h["needed_bytes"].get<double>()).c_str(), gib(h["memory_bytes"].get<double>()).c_str());
    if (h["fits"].get<bool>())
      std::printf(": fits\n");
    else
      std::printf(": DOES NOT FIT, %s short\n", gib(h["shortfall_bytes"].get<double>()).c_str());
  }
  std::printf("\nfiles each host needs (besides config.json, manifest.json and the tokenizer files):\n");
  for (const auto& h : j["per_host"]) {
    const auto& files = h["files"];
    std::printf("  %s:", h["host"].get<std::string>().c_str());
    if (files.size() <= 12) {
      for (const auto& f : files) std::printf(" %s", f.get<std::string>().c_str());
    } else {  // the whole list is in --json
      std::printf(" %zu files, %s ... %s (--json lists them)", files.size(), files.front().get<std::string>().c_str(),
                  files.back().get<std::string>().c_str());
    }
    std::printf("\n");
  }
  std::printf("\npredicted tokens/s (host %s; link %s; decode at context %d; %.1f MB of weights per token at batch 1)\n",
              j["host_profile"]["name"].get<std::string>().c_str(), j["link_profile"]["name"].get<std::string>().c_str(),
              j["context"].get<int>(), j["bytes_per_token"].get<double>() / 1e6);
  std::printf("  %-9s %-8s %7s %12s %12s  %s\n", "mode", "phase", "batch", "tokens/s", "step ms", "bound");
  for (const auto& p : j["predictions"])
    std::printf("  %-9s %-8s %7lld %12.2f %12.2f  %s\n", p["mode"].get<std::string>().c_str(),
                p["phase"].get<std::string>().c_str(), (long long)p["batch"].get<int64_t>(),
                p["tokens_per_s"].get<double>(), p["step_seconds"].get<double>() * 1e3,
                p["bound"].get<std::string>().c_str());
  if (!j["fits"].get<bool>()) std::printf("\nthe plan does not fit: see the shortfall above\n");
}

}  // namespace trillion::app
