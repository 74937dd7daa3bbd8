// The integer-dot path on FP8 models (DeepSeek-V3's native format). The
// int8 kernels read INT8_G32 weights, so each FP8 linear weight is
// requantized once, on first use, to int8 groups of 32 (quantize.hpp
// requantize_fp8_to_int8: the same rule as `convert --quantize int8`,
// applied to the FP8 value code x block scale), and the model reads those.
// Why not an FP8 integer kernel: e4m3 values are not integers under one
// scale per group (each carries its own exponent), so an exact integer dot
// product needs int16 lanes and a per-element shift, halving the rate of the
// int8 path; requantizing costs one rounding of the weights (bench/quality.py
// measures its effect) and makes FP8 run exactly as fast as INT8.
//
// kv_b_proj stays FP8: the absorbed attention uses its W_UK/W_UV blocks on
// the exact float path (model/linear.hpp), as it does for every format.
// lm_head, which DeepSeek ships in BF16, is quantized by the same rule
// (quantize_matrix's int8_group), as `convert --quantize int8` quantizes
// it: on the integer path an FP8 model then streams what an INT8 model
// does (the bench model's BF16 head was a third of its batch-1 bytes).
#pragma once
#include <map>
#include <mutex>
#include <string>

#include "common/page_arena.hpp"
#include "common/tensor_view.hpp"
#include "store/quantize.hpp"

namespace trillion {

class ThreadPool;

// Whether an FP8 model's integer path holds the weight tensor `name`
// ("P.weight") of dtype `dtype` as int8 groups: every FP8 linear but
// kv_b_proj, and a BF16 lm_head. The one rule: this source converts by it,
// and plan counts the copy (quantized_bytes(int8_group, ...)) and the
// bytes a step reads by it.
bool int8_copy_holds(const std::string& name, DType dtype);

class Int8FromFp8Source : public TensorSource {
 public:
  // `inner` (and `pool`, which may be null) must outlive this source; the
  // requantized tensors live as long as it does.
  Int8FromFp8Source(TensorSource& inner, ThreadPool* pool);

  // P.weight of an FP8 linear layer P (and of a BF16 lm_head) is an I8
  // tensor, P.weight_scale its BF16 scales and P.weight_scale_inv is gone;
  // everything else is inner's.
  bool has(const std::string& name) const override;
  TensorView tensor(const std::string& name) override;

  QuantStats stats() const;  // of every matrix requantized so far, against its FP8 (lm_head: BF16) values

 private:
  bool converts(const std::string& prefix) const;
  const QuantizedMatrix& requantized(const std::string& prefix);
  const QuantizedMatrix& place(const std::string& prefix, QuantizedMatrix q);  // under mu_

  TensorSource& inner_;
  ThreadPool* pool_;
  // The requantized tensors' bytes, on 2 MiB pages (page_arena.hpp): they
  // are read as the INT8 model's mapped shards are; on 4 KiB heap pages FP8
  // ran clearly slower than INT8 on the same kernels (docs/benchmarks.md).
  mutable std::mutex mu_;
  std::map<std::string, QuantizedMatrix> done_;  // by prefix (for stats; their bytes moved to arena_)
  std::map<std::string, TensorView> placed_;     // by tensor name: views into arena_
  PageArena arena_;
};

}  // namespace trillion
