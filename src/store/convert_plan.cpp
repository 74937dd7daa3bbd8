#include "store/convert_plan.hpp"

#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "common/error.hpp"
#include "format/config_extent.hpp"
#include "format/hf_tensors.hpp"

namespace trillion {

namespace {

// The two integers of a compressed-tensors weight_shape tensor ([out, in]).
bool read_pair(const HfCheckpoint::Tensor& t, std::vector<int64_t>* out) {
  const SafetensorsEntry& e = *t.entry;
  if (e.shape != std::vector<int64_t>{2}) return false;
  const std::byte* p = t.file->data(e);
  out->clear();
  for (int i = 0; i < 2; ++i) {
    if (e.dtype == DType::I32) {
      int32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      out->push_back(v);
    } else if (e.dtype == DType::I64) {
      int64_t v;
      std::memcpy(&v, p + 8 * i, 8);
      out->push_back(v);
    } else {
      return false;
    }
  }
  return true;
}

class Planner {
 public:
  Planner(const HfCheckpoint& ckpt, const ModelConfig& cfg, int64_t eps) : ckpt_(ckpt), cfg_(cfg), eps_(eps) {}

  ConvertPlan run() {
    // Before the table, whose size is the config's claim (layers x experts).
    check_config_extent(cfg_, ckpt_.names(), ckpt_.dir() + "/config.json", ckpt_.index_path());
    check_table();
    place_mtp();
    if (!problems_.empty()) {
      std::string msg = ckpt_.dir() + ": checkpoint does not match its config.json (" +
                        std::to_string(problems_.size()) + " problem" + (problems_.size() > 1 ? "s" : "") + "):";
      for (size_t i = 0; i < problems_.size() && i < 20; ++i) msg += "\n  " + problems_[i];
      if (problems_.size() > 20) msg += "\n  ... and " + std::to_string(problems_.size() - 20) + " more";
      throw FormatError(msg);
    }
    return std::move(plan_);
  }

 private:
  void place(const ShardKey& key, const HfCheckpoint::Tensor& t, LinearRole linear = LinearRole::none) {
    auto [it, fresh] = shard_pos_.emplace(key.file, plan_.shards.size());
    if (fresh) plan_.shards.push_back(PlannedShard{key, {}});
    PlannedShard& s = plan_.shards[it->second];
    tensor_pos_[t.entry->name] = {it->second, s.tensors.size()};
    s.tensors.push_back(PlannedTensor{t.file, t.entry, {}, linear});
    plan_.tensors += 1;
    plan_.bytes += t.entry->nbytes();
  }
  PlannedTensor* planned(const std::string& name) {
    auto it = tensor_pos_.find(name);
    return it == tensor_pos_.end() ? nullptr : &plan_.shards[it->second.first].tensors[it->second.second];
  }

  void check_table() {
    std::unordered_map<std::string, std::vector<int64_t>> unpacked;  // weight_packed name -> [out, in]
    for (const ExpectedTensor& e : expected_hf_tensors(cfg_)) {
      claimed_.insert(e.name);
      const HfCheckpoint::Tensor* t = ckpt_.find(e.name);
      if (!t) {
        problems_.push_back("tensor '" + e.name + "' is missing (" + ckpt_.index_path() + ")");
        continue;
      }
      const std::string where = t->file->path() + ": tensor '" + e.name + "': ";
      bool dtype_ok = false;
      for (DType d : e.dtypes) dtype_ok |= d == t->entry->dtype;
      if (!dtype_ok) {
        problems_.push_back(where + "dtype " + dtype_name(t->entry->dtype) + ", expected " +
                            dtype_name(e.dtypes.front()) + " for a " + to_string(cfg_.weight_format) +
                            " checkpoint");
        continue;
      }
      if (t->entry->shape != e.shape) {
        problems_.push_back(where + "shape " + shape_string(t->entry->shape) + ", config.json implies " +
                            shape_string(e.shape));
        continue;
      }
      if (!e.attribute_only) {
        place(shard_for(e.role, e.layer, e.expert, cfg_, eps_), *t, e.linear);
        static const std::string kPacked = ".weight_packed";  // int4: [out, in/8] of [out, in]
        if (e.name.size() > kPacked.size() && e.name.ends_with(kPacked))
          unpacked[e.name] = {e.shape[0], e.shape[1] * 8};
        continue;
      }
      // weight_shape: its value must be the unpacked shape; it becomes an attribute.
      const std::string packed = packed_name_for_shape(e.name);
      std::vector<int64_t> value;
      if (!read_pair(*t, &value) || value != unpacked[packed]) {
        problems_.push_back(where + "value " + shape_string(value) + ", expected " + shape_string(unpacked[packed]));
        continue;
      }
      if (PlannedTensor* p = planned(packed)) p->weight_shape = value;
    }
  }

  // Multi-token-prediction layers are copied as found; everything else the
  // table does not list is reported and skipped.
  void place_mtp() {
    std::vector<std::string> extras, shapes;
    int64_t mtp = 0;
    for (const std::string& name : ckpt_.names()) {
      if (claimed_.count(name)) continue;
      const HfNameParts parts = parse_hf_name(name);
      if (parts.layer < cfg_.num_hidden_layers) {
        extras.push_back(name);
        continue;
      }
      const std::string packed = packed_name_for_shape(name);
      if (!packed.empty() && ckpt_.find(packed)) {  // after the packed tensor is placed
        shapes.push_back(name);
        continue;
      }
      if (ckpt_.find(name)->entry->nbytes() == 0) {  // nothing to store; HDF5 cannot place it
        extras.push_back(name);
        continue;
      }
      const TensorRole role = parts.expert >= 0 ? TensorRole::mtp_experts : TensorRole::mtp;
      place(shard_for(role, parts.layer, parts.expert, cfg_, eps_), *ckpt_.find(name));
      ++mtp;
    }
    for (const std::string& name : shapes) {
      std::vector<int64_t> value;
      PlannedTensor* p = planned(packed_name_for_shape(name));
      if (read_pair(*ckpt_.find(name), &value) && p) {
        p->weight_shape = value;
      } else {  // not a shape pair after all: keep it as a dataset
        const HfNameParts parts = parse_hf_name(name);
        place(shard_for(parts.expert >= 0 ? TensorRole::mtp_experts : TensorRole::mtp, parts.layer, parts.expert,
                        cfg_, eps_),
              *ckpt_.find(name));
      }
    }
    if (!extras.empty()) {
      std::string w = std::to_string(extras.size()) + " tensor(s) of the checkpoint are not used by trillion and are skipped:";
      for (size_t i = 0; i < extras.size() && i < 5; ++i) w += " " + extras[i];
      if (extras.size() > 5) w += " ...";
      plan_.warnings.push_back(w);
    }
    if (cfg_.num_nextn_predict_layers > 0 && mtp == 0)
      plan_.warnings.push_back("config.json declares " + std::to_string(cfg_.num_nextn_predict_layers) +
                               " multi-token-prediction layer(s) but the checkpoint has none (not needed to run)");
  }

  const HfCheckpoint& ckpt_;
  const ModelConfig& cfg_;
  int64_t eps_;
  ConvertPlan plan_;
  std::vector<std::string> problems_;
  std::unordered_set<std::string> claimed_;
  std::unordered_map<std::string, size_t> shard_pos_;
  std::unordered_map<std::string, std::pair<size_t, size_t>> tensor_pos_;
};

}  // namespace

ConvertPlan plan_conversion(const HfCheckpoint& ckpt, const ModelConfig& cfg, int64_t experts_per_shard) {
  if (experts_per_shard < 1)
    throw ConfigError("experts per shard must be >= 1, got " + std::to_string(experts_per_shard));
  return Planner(ckpt, cfg, experts_per_shard).run();
}

}  // namespace trillion
