#include "parallel/run_footprint.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "common/error.hpp"
#include "model/kv_pools.hpp"
#include "platform/process_memory.hpp"

namespace trillion {

namespace {

std::string gb(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GB", bytes / 1e9);
  return buf;
}

std::string count(double n) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", std::max(0.0, std::floor(n)));
  return buf;
}

}  // namespace

RunFootprint run_footprint(const ModelConfig& cfg, const RunShape& shape, int64_t layers, int32_t pool_slots) {
  RunFootprint f;
  // As KvCache stores it: c_kv and k_pe, float32, per position per layer.
  f.position_bytes = 4.0 * double(cfg.kv_lora_rank + cfg.qk_rope_head_dim) * double(layers);
  const double block = KvPools::kBlockTokens;
  f.kv_positions = shape.kv_tokens > 0 ? std::ceil(double(shape.kv_tokens) / block) * block
                                       : double(std::max(pool_slots, 0)) * std::ceil(double(shape.max_len) / block) * block;
  f.kv_bytes = f.position_bytes * f.kv_positions;
  // One step's rows, float32: the residual and its normed copies, queries and
  // per-head outputs, the widest MLP (shared + routed experts of a token),
  // the logits, and the activation channel's ring (about two steps).
  const double H = double(cfg.num_attention_heads), d = double(cfg.hidden_size);
  const double mlp = std::max(double(cfg.intermediate_size),
                              double(cfg.moe_intermediate_size) * double(cfg.n_shared_experts + cfg.num_experts_per_tok));
  const double per_row = 4.0 * (8 * d + 2 * H * double(cfg.qk_head_dim() + cfg.v_head_dim) + 3 * mlp +
                                double(cfg.vocab_size) + double(cfg.kv_lora_rank + cfg.qk_rope_head_dim));
  f.activation_bytes = per_row * double(shape.max_step_rows());
  return f;
}

void check_run_memory(const ModelConfig& cfg, const RunShape& shape, int64_t layers, int32_t pool_slots,
                      double memory_bytes) {
  if (memory_bytes <= 0) return;  // unknown: nothing to check against
  const RunFootprint f = run_footprint(cfg, shape, layers, pool_slots);
  const std::string have = "the " + gb(memory_bytes) + " of memory this rank has";
  if (f.activation_bytes > memory_bytes / 2) {
    const double per_row = f.activation_bytes / double(shape.max_step_rows());
    throw InputError("--step-tokens " + std::to_string(shape.step_tokens) + " with --max-batch " +
                     std::to_string(shape.slots) + ": one step's " + std::to_string(shape.max_step_rows()) +
                     " rows of activations need " + gb(f.activation_bytes) + ", more than half of " + have +
                     " (at most " + count(memory_bytes / 2 / per_row) + " step tokens + slots fit)");
  }
  if (f.kv_bytes + f.activation_bytes <= memory_bytes) return;
  const std::string fit = count((memory_bytes - f.activation_bytes) / f.position_bytes);
  const std::string need = ": the KV cache needs " + gb(f.kv_bytes) + " (" + count(f.kv_positions) +
                           " positions x " + count(f.position_bytes) + " bytes over " + std::to_string(layers) +
                           " layers) plus " + gb(f.activation_bytes) + " of activations, more than " + have;
  if (shape.kv_tokens > 0)
    throw InputError("--kv-cache-tokens " + std::to_string(shape.kv_tokens) + need + " (at most " + fit +
                     " tokens fit)");
  throw InputError("--max-batch " + std::to_string(shape.slots) + " x --max-len " + std::to_string(shape.max_len) +
                   need + "; lower them, or give --kv-cache-tokens (at most " + fit + " fit)");
}

double physical_memory_bytes() { return double(platform::physical_memory_bytes()); }

}  // namespace trillion
