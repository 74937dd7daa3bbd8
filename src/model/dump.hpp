// Debug hook: with TRILLION_DUMP=DIR set, the forward pass writes its named
// intermediates as .npy files, DIR/step-NNNNN/layer-LLL.NAME.npy (float32,
// shape as documented at each call), so a mismatch with the float64 reference
// (tests/reference) can be found layer by layer. Off (and free) otherwise.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace trillion {

class Dumper {
 public:
  Dumper();  // reads TRILLION_DUMP
  bool enabled() const { return !dir_.empty(); }
  void next_step() { ++step_; }  // one Transformer::forward call = one step

  // layer < 0: a model-level tensor (embed, final norm, logits): step-N/model.NAME.npy.
  void dump(int64_t layer, const std::string& name, const float* data, std::vector<int64_t> shape) const;

 private:
  std::string dir_;
  int64_t step_ = 0;
};

}  // namespace trillion
