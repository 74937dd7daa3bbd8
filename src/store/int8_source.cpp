#include "store/int8_source.hpp"

#include <algorithm>
#include <vector>

#include "common/error.hpp"
#include "format/hf_tensors.hpp"

namespace trillion {

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// "P.weight" -> "P" (or "" when name does not end with `suffix`).
std::string prefix_of(const std::string& name, const std::string& suffix) {
  return ends_with(name, suffix) ? name.substr(0, name.size() - suffix.size()) : std::string();
}

}  // namespace

bool int8_copy_holds(const std::string& name, DType dtype) {
  if (dtype == DType::BF16) return name == hf_name(Weight::lm_head) + ".weight";
  if (dtype != DType::F8_E4M3 || !ends_with(name, ".weight")) return false;
  const int64_t layer = parse_hf_name(name).layer;
  return layer < 0 || name != hf_name(Weight::kv_b, layer) + ".weight";
}

Int8FromFp8Source::Int8FromFp8Source(TensorSource& inner, ThreadPool* pool) : inner_(inner), pool_(pool) {}

// int8_copy_holds by names alone (a TensorSource tells no dtype without
// fetching the tensor): an FP8 weight is one with weight_scale_inv, the BF16
// lm_head one with no scale at all (its dtype is checked when it is requantized).
bool Int8FromFp8Source::converts(const std::string& prefix) const {
  if (prefix.empty() || !inner_.has(prefix + ".weight")) return false;
  if (inner_.has(prefix + ".weight_scale_inv")) return int8_copy_holds(prefix + ".weight", DType::F8_E4M3);
  return !inner_.has(prefix + ".weight_scale") && !inner_.has(prefix + ".weight_packed") &&
         int8_copy_holds(prefix + ".weight", DType::BF16);
}

bool Int8FromFp8Source::has(const std::string& name) const {
  if (const std::string p = prefix_of(name, ".weight_scale"); converts(p)) return true;
  if (const std::string p = prefix_of(name, ".weight_scale_inv"); converts(p)) return false;
  return inner_.has(name);
}

const QuantizedMatrix& Int8FromFp8Source::requantized(const std::string& prefix) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = done_.find(prefix); it != done_.end()) return it->second;
  const TensorView w = inner_.tensor(prefix + ".weight");
  if (prefix == hf_name(Weight::lm_head)) {
    if (w.dtype != DType::BF16 || w.shape.size() != 2)
      throw FormatError("tensor '" + prefix + ".weight': the integer-dot path of an FP8 model requantizes a BF16 [vocab, "
                        "hidden] lm_head; this one is not (run it with --activations f32)");
    return place(prefix,
                 quantize_matrix(WeightFormat::int8_group, prefix, w.as<uint16_t>(), w.shape[0], w.shape[1], pool_));
  }
  const TensorView s = inner_.tensor(prefix + ".weight_scale_inv");
  if (w.dtype != DType::F8_E4M3 || w.shape.size() != 2)
    throw FormatError("tensor '" + prefix + ".weight': expected F8_E4M3 [rows, cols] with F32 weight_scale_inv");
  const int64_t rows = w.shape[0], cols = w.shape[1];
  const std::vector<float> scale = fp8_block_scales(prefix, s.dtype, s.shape, s.data, rows, cols);
  return place(prefix, requantize_fp8_to_int8(prefix, w.as<uint8_t>(), scale.data(), rows, cols, pool_));
}

const QuantizedMatrix& Int8FromFp8Source::place(const std::string& prefix, QuantizedMatrix q) {
  for (QuantTensor& t : q.tensors) {
    std::byte* p = arena_.allocate(t.data.size());
    std::copy(t.data.begin(), t.data.end(), p);
    placed_[t.name] = TensorView{t.name, t.dtype, t.shape, p, t.data.size()};
    std::vector<std::byte>().swap(t.data);  // the heap copy goes now, not with the source
  }
  return done_.emplace(prefix, std::move(q)).first->second;
}

TensorView Int8FromFp8Source::tensor(const std::string& name) {
  for (const char* suffix : {".weight", ".weight_scale"}) {
    const std::string p = prefix_of(name, suffix);
    if (!converts(p)) continue;
    requantized(p);
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = placed_.find(name); it != placed_.end()) return it->second;
  }
  if (const std::string p = prefix_of(name, ".weight_scale_inv"); converts(p))
    throw FormatError("tensor '" + name + "': replaced by int8 scales on the integer-dot path");
  return inner_.tensor(name);
}

QuantStats Int8FromFp8Source::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  QuantStats s;
  for (const auto& [prefix, q] : done_) s.add(q.stats);
  return s;
}

}  // namespace trillion
