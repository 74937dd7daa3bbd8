#include "plan/config_manifest.hpp"

#include <map>

#include "common/error.hpp"
#include "format/hf_tensors.hpp"
#include "store/shard_layout.hpp"

namespace trillion {

Manifest manifest_from_config(const ModelConfig& cfg, int64_t experts_per_shard) {
  Manifest m;
  m.weight_format = cfg.weight_format;
  m.experts_per_shard = experts_per_shard;
  m.quantized_from = cfg.requantized ? to_string(cfg.requantized_from) : "";
  std::vector<TensorInfo> tensors;
  std::map<std::string, ShardInfo> shards;
  std::vector<std::string> shard_order;  // first appearance, as the converter writes them
  for (const ExpectedTensor& e : expected_hf_tensors(cfg)) {
    if (e.attribute_only) continue;  // weight_shape: an attribute of weight_packed, not a dataset
    const ShardKey key = shard_for(e.role, e.layer, e.expert, cfg, experts_per_shard);
    TensorInfo t;
    t.name = e.name;
    t.shard = key.file;
    t.dtype = e.dtypes.front();
    t.shape = e.shape;
    t.nbytes = uint64_t(t.numel()) * dtype_size(t.dtype);
    // INT4 weight_packed [out, in/8] of int32 holds an [out, in] matrix.
    if (t.dtype == DType::I32 && t.shape.size() == 2) t.weight_shape = {t.shape[0], t.shape[1] * 8};
    auto [it, fresh] = shards.try_emplace(key.file, ShardInfo{key.file, 0, key.role, key.layer, key.expert_first,
                                                              key.expert_last, std::nullopt});
    if (fresh) shard_order.push_back(key.file);
    it->second.bytes += t.nbytes;
    tensors.push_back(std::move(t));
  }
  for (const std::string& f : shard_order) m.add_shard(shards.at(f));
  for (TensorInfo& t : tensors) m.add_tensor(std::move(t));
  return m;
}

ModelConfig quantized_config(const ModelConfig& cfg, WeightFormat fmt) {
  if (const std::string why = quantization_refused(cfg, fmt); !why.empty())
    throw InputError("--quantize " + std::string(to_string(fmt)) + ": " + why + " (plan it as it is)");
  ModelConfig q = cfg;
  q.weight_format = fmt;
  q.requantized = true;
  q.requantized_from = cfg.weight_format;
  return q;
}

}  // namespace trillion
