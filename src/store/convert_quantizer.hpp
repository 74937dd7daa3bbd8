// The quantization of one conversion (`convert --quantize`), shared by every
// shard: which planned tensors it rewrites, and their quantized form. A bf16
// checkpoint's linear layers go to int8, int4 or fp8 (quantize.hpp's rules);
// a native fp8 checkpoint's go to int8, each weight's exact value (e4m3 code
// x its block's scale_inv) quantized by the int8 rule, and the scale_inv
// tensors are dropped (the int8 groups carry their own scales). The next
// matrix is quantized (by the pool, from a helper thread) while the current
// one is written, so the CPU work hides behind the disk writes.
#pragma once
#include <cstdint>
#include <future>
#include <map>
#include <string>
#include <vector>

#include "config/model_config.hpp"
#include "store/convert_plan.hpp"
#include "store/quantize.hpp"

namespace trillion {

class ThreadPool;

enum class Rewrite { keep, quantize, drop };

// What --quantize `to` does with `t` of a `from` checkpoint: a linear layer's
// matrix that `to` can store is quantized (bf16, or fp8 from fp8), an fp8
// matrix's scale_inv dropped, everything else kept as it is.
Rewrite rewrite_of(const PlannedTensor& t, WeightFormat to, WeightFormat from);

// The bytes the converted model's tensors take.
uint64_t quantized_output_bytes(const ConvertPlan& plan, WeightFormat to, WeightFormat from);

class Quantizer {
 public:
  Quantizer(WeightFormat to, WeightFormat from, ThreadPool* pool, QuantizationReport* report, const ConvertPlan& plan);
  ~Quantizer();
  Quantizer(const Quantizer&) = delete;
  Quantizer& operator=(const Quantizer&) = delete;

  Rewrite rewrite(const PlannedTensor& t) const { return rewrite_of(t, to_, from_); }

  // The quantized form of `t` (rewrite() == quantize); such tensors must be
  // taken in plan order.
  QuantizedMatrix take(const PlannedTensor& t);
  // `t` is stored unchanged: a linear layer's matrix is listed as kept.
  void kept(const PlannedTensor& t);

 private:
  void launch();
  QuantizedMatrix quantize(const PlannedTensor& t) const;

  WeightFormat to_, from_;
  ThreadPool* pool_;
  QuantizationReport* report_;
  std::vector<const PlannedTensor*> order_;
  std::map<std::string, const PlannedTensor*> scales_;  // fp8: "<prefix>.weight_scale_inv" -> its tensor
  size_t next_ = 0;
  std::future<QuantizedMatrix> pending_;
};

// "model.layers.0.mlp.up_proj" of "model.layers.0.mlp.up_proj.weight".
std::string matrix_prefix(const std::string& name);

}  // namespace trillion
