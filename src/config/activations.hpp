// The compute path of the weight products (--activations), chosen once per
// run: model/linear.hpp runs it, plan/ predicts its cost and memory, the
// command line names it.
//   f32:  float32 activations, float32 accumulation, every weight format;
//   int8: activations quantized per token to int8 in groups of 32, exact
//         integer dot products for INT8_G32 and INT4_G32 weights (FP8
//         models get INT8_G32 weights by requantizing at load:
//         store/int8_source.hpp); BF16 and F32 stay on f32.
//   bf16: FP8_B128 weights read in place and exactly, activations rounded
//         to bf16, bf16 dot products into float32 lanes, each 128-column
//         block's sum scaled (kernels/matmul_bf16.hpp defines the bits); no
//         copy of the weights; every other format stays on f32.
#pragma once
#include <cstdint>
#include <string>

#include "config/model_config.hpp"

namespace trillion {

enum class Activations : uint8_t { f32, int8, bf16 };
Activations parse_activations(const std::string& s);  // "f32" | "int8" | "bf16"; throws InputError
const char* to_string(Activations a);
// --activations auto for a model stored as `f` (the default): int8 for INT8
// and INT4 models, as in every peer engine; f32 for BF16. For FP8 the
// fastest path that fits, the same on every rank: bf16 when every rank's CPU
// runs it faster than f32 (kernels/matmul_bf16.hpp, bf16_auto_faster: arm64
// with FEAT_BF16); else int8 when the int8 copy of the FP8 linears (~1.06
// bytes per weight beside the mapped FP8 pages) fits every rank's memory;
// else f32 (activations.cpp says why in that order).
Activations auto_activations(WeightFormat f, bool int8_copy_fits_everywhere, bool bf16_faster_everywhere);
// Whether auto's choice for `f` depends on the hosts (memory and CPUs): FP8.
// The callers then work out the two facts (app/cluster.cpp over the ranks,
// app/cmd_plan.cpp from the profile).
inline bool auto_weighs_hosts(const std::string& flag, WeightFormat f) {
  return flag == "auto" && f == WeightFormat::fp8_block;
}
// The --activations flag: "auto" as auto_activations (the two facts matter
// for FP8 only); "f32", "int8" and "bf16" as given.
Activations resolve_activations(const std::string& flag, WeightFormat f, bool int8_copy_fits_everywhere,
                                bool bf16_faster_everywhere);
// Whether a model stored as `f` on path `a` reads its FP8 linears as int8
// copies (store/int8_source.hpp), which cost memory of their own.
inline bool requantizes_fp8(Activations a, WeightFormat f) {
  return a == Activations::int8 && f == WeightFormat::fp8_block;
}

}  // namespace trillion
