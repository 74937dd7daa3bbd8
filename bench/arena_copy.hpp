// bench_model --copy-versus: a TensorSource that hands out copies of another
// source's tensors, made on first use in anonymous memory (a PageArena: 2 MiB
// pages), where an FP8 model's int8 copy lives (store/int8_source.hpp),
// rather than in the mapped shards.
//
// Why: FP8 on the integer path streams the same bytes through the same
// kernels as INT8, yet in one process the two measured 0.92-1.10x of each
// other, the sign depending on the machine's state. The same INT8 model
// against a copy of itself made here measured 0.96-1.09x too, so the
// difference comes from where the weights lie in memory, not their format.
#pragma once
#include <cstring>
#include <map>
#include <string>

#include "common/page_arena.hpp"
#include "common/tensor_view.hpp"

namespace trillion::bench {

class ArenaCopy : public TensorSource {
 public:
  explicit ArenaCopy(TensorSource& inner) : inner_(inner) {}
  bool has(const std::string& name) const override { return inner_.has(name); }
  TensorView tensor(const std::string& name) override {
    if (auto it = copies_.find(name); it != copies_.end()) return it->second;
    TensorView v = inner_.tensor(name);
    std::byte* p = arena_.allocate(v.nbytes);
    std::memcpy(p, v.data, v.nbytes);
    v.data = p;
    return copies_.emplace(name, v).first->second;
  }

 private:
  TensorSource& inner_;
  PageArena arena_;
  std::map<std::string, TensorView> copies_;
};

}  // namespace trillion::bench
