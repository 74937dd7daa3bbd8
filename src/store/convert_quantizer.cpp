#include "store/convert_quantizer.hpp"

#include <cstring>

#include "common/error.hpp"
#include "format/hf_tensors.hpp"
#include "format/safetensors.hpp"

namespace trillion {

namespace {

const std::string kScaleInv = ".weight_scale_inv";

bool is_matrix(const SafetensorsEntry& e, DType dt) { return e.dtype == dt && e.shape.size() == 2; }

}  // namespace

std::string matrix_prefix(const std::string& name) {
  static const std::string kWeight = ".weight";
  return name.ends_with(kWeight) ? name.substr(0, name.size() - kWeight.size()) : name;
}

Rewrite rewrite_of(const PlannedTensor& t, WeightFormat to, WeightFormat from) {
  if (t.linear == LinearRole::none) return Rewrite::keep;  // embedding, norms, router, MTP layers
  const SafetensorsEntry& e = *t.entry;
  if (is_matrix(e, DType::BF16) && quantizable(to, e.shape[1])) return Rewrite::quantize;
  if (from == WeightFormat::fp8_block && to == WeightFormat::int8_group) {
    if (is_matrix(e, DType::F8_E4M3)) return Rewrite::quantize;
    if (e.name.ends_with(kScaleInv)) return Rewrite::drop;  // its matrix is quantized (int8 takes every width)
  }
  return Rewrite::keep;
}

uint64_t quantized_output_bytes(const ConvertPlan& plan, WeightFormat to, WeightFormat from) {
  uint64_t bytes = 0;
  for (const PlannedShard& s : plan.shards)
    for (const PlannedTensor& t : s.tensors) switch (rewrite_of(t, to, from)) {
        case Rewrite::keep: bytes += t.entry->nbytes(); break;
        case Rewrite::quantize: bytes += quantized_bytes(to, t.entry->shape[0], t.entry->shape[1]); break;
        case Rewrite::drop: break;
      }
  return bytes;
}

Quantizer::Quantizer(WeightFormat to, WeightFormat from, ThreadPool* pool, QuantizationReport* report,
                     const ConvertPlan& plan)
    : to_(to), from_(from), pool_(pool), report_(report) {
  for (const PlannedShard& s : plan.shards)
    for (const PlannedTensor& t : s.tensors) {
      if (rewrite(t) == Rewrite::quantize) order_.push_back(&t);
      if (t.entry->name.ends_with(kScaleInv)) scales_[t.entry->name] = &t;
    }
}

Quantizer::~Quantizer() {
  if (pending_.valid()) pending_.wait();
}

QuantizedMatrix Quantizer::take(const PlannedTensor& t) {
  if (next_ >= order_.size() || order_[next_] != &t) throw Error("convert: quantization out of plan order");
  if (!pending_.valid()) launch();
  QuantizedMatrix q = pending_.get();
  report_->add(matrix_prefix(t.entry->name), t.linear, t.entry->shape, q.stats);
  ++next_;
  launch();
  return q;
}

void Quantizer::kept(const PlannedTensor& t) {
  if (t.linear != LinearRole::none && t.entry->name.ends_with(".weight"))
    report_->kept.push_back(matrix_prefix(t.entry->name));
}

void Quantizer::launch() {
  if (next_ >= order_.size()) return;
  const PlannedTensor* t = order_[next_];
  pending_ = std::async(std::launch::async, [this, t] { return quantize(*t); });
}

QuantizedMatrix Quantizer::quantize(const PlannedTensor& t) const {
  const SafetensorsEntry& e = *t.entry;
  const std::string prefix = matrix_prefix(e.name);
  const int64_t rows = e.shape[0], cols = e.shape[1];
  if (e.dtype == DType::BF16)
    return quantize_matrix(to_, prefix, reinterpret_cast<const uint16_t*>(t.file->data(e)), rows, cols, pool_);
  // fp8: the block scales beside it.
  const auto it = scales_.find(prefix + kScaleInv);
  if (it == scales_.end()) throw FormatError("tensor '" + e.name + "': no " + prefix + kScaleInv + " beside it");
  const SafetensorsEntry& s = *it->second->entry;
  const std::vector<float> scale = fp8_block_scales(prefix, s.dtype, s.shape, it->second->file->data(s), rows, cols);
  return requantize_fp8_to_int8(prefix, reinterpret_cast<const uint8_t*>(t.file->data(e)), scale.data(), rows, cols,
                                pool_);
}

}  // namespace trillion
