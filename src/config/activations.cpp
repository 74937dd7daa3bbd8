#include "config/activations.hpp"

#include "common/error.hpp"

namespace trillion {

Activations parse_activations(const std::string& s) {
  if (s == "f32") return Activations::f32;
  if (s == "int8") return Activations::int8;
  if (s == "bf16") return Activations::bf16;
  throw InputError("--activations '" + s + "': expected auto, f32, int8 or bf16");
}

const char* to_string(Activations a) {
  switch (a) {
    case Activations::int8: return "int8";
    case Activations::bf16: return "bf16";
    case Activations::f32: break;
  }
  return "f32";
}

Activations auto_activations(WeightFormat f, bool int8_copy_fits_everywhere, bool bf16_faster_everywhere) {
  if (f == WeightFormat::int4_group || f == WeightFormat::int8_group) return Activations::int8;
  if (f != WeightFormat::fp8_block) return Activations::f32;
  // FP8: bf16 first where every rank's CPU runs it faster than f32 (arm64
  // with BF16: bench/neon_loop_counts.py, 4x fewer instructions an output at
  // batch 32): it reads the FP8 pages in place (no copy, no requantization
  // at load), is nearer the exact path (KL 1.1e-4 nats against int8's
  // 7.6e-4 on the bundled model) and, by instruction counts, faster than the
  // int8 copy from batch ~8 and at prefill, the batch jobs' phases; at batch
  // 1 the int8 copy issues fewer instructions (docs/kernels.md). Elsewhere
  // (x86: vdpbf16ps measured slower than the f32 path) the requantized int8
  // path where its copy (DeepSeek-V3: ~700 GB more) fits, else f32. Every
  // rank must agree: the callers pass facts true on every rank, so a run's
  // bits depend on the cluster, not on which rank asks.
  if (bf16_faster_everywhere) return Activations::bf16;
  return int8_copy_fits_everywhere ? Activations::int8 : Activations::f32;
}

Activations resolve_activations(const std::string& flag, WeightFormat f, bool int8_copy_fits_everywhere,
                                bool bf16_faster_everywhere) {
  if (flag != "auto") return parse_activations(flag);
  return auto_activations(f, int8_copy_fits_everywhere, bf16_faster_everywhere);
}

}  // namespace trillion
