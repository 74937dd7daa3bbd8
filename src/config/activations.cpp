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

Activations resolve_activations(const std::string& flag, WeightFormat f) {
  if (flag != "auto") return parse_activations(flag);
  // FP8 stays on f32 by default, though with VNNI the requantized int8 path
  // is the faster (docs/kernels.md): its int8 copy costs ~1.06 bytes
  // per weight of memory beside the mapped FP8 pages (DeepSeek-V3: ~700 GB
  // more), and a default chosen by each rank's CPU would make one command's
  // bits depend on the machine. On AVX2 without VNNI f32 is also the faster.
  // `--activations int8` takes it.
  return f == WeightFormat::int4_group || f == WeightFormat::int8_group ? Activations::int8 : Activations::f32;
}

}  // namespace trillion
