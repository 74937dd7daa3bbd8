// Transformer::forward with the step's rows in groups that take turns at the
// MoE layers, so an expert-parallel rank computes while its tokens travel
// (the next layer's attention is free to start for a group whose combine is
// done; docs/parallel.md, "Expert parallel"). With groups a and b, a MoE layer l runs
//
//   [end a(l-1), combine] attention a(l), route, begin a(l)    (a's dispatch leaves)
//   [end b(l-1), combine] attention b(l), route, begin b(l)    (while a's travels)
//   serve a(l) and b(l)                 (the pairs other ranks sent to our experts)
//
// and a's next layer starts while b's outputs are still on their way. Each
// group is one exchange per MoE layer, in the same order on every rank, so
// the messages between two ranks always line up. Rows never mix inside a
// kernel (kernel contract) and attention is per sequence, so a row's bits do
// not depend on its group.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "model/dump.hpp"
#include "model/mlp.hpp"
#include "model/moe.hpp"
#include "model/rope.hpp"
#include "model/step.hpp"
#include "model/transformer.hpp"
#include "model/weights.hpp"

namespace trillion {
namespace {

struct Group {
  Batch batch;
  std::vector<int64_t> rows;          // indices into the step's rows, in order
  std::vector<float> x, h, delta;     // [n, d]
  std::vector<float> cos, sin;        // [n, rope/2]
  MoeInFlight moe;
  const LayerWeights* pending = nullptr;  // the MoE layer whose experts are out
};

// Whole sequences to each group, in order of first appearance, so that
// group g starts once g/groups of the rows are placed: a sequence's rows stay
// together (its prefill rows attend to each other through the cache).
// Fewer than min_rows rows a group: fewer groups (all rows in the first
// one at worst; the others stay empty but still take their turns, so the
// exchanges line up).
std::vector<int> split_rows(const Batch& batch, int groups, int64_t min_rows) {
  const int64_t n = batch.size();
  groups = int(std::max<int64_t>(1, std::min<int64_t>(groups, n / std::max<int64_t>(1, min_rows))));
  std::map<int32_t, int> group_of_slot;
  std::vector<int> group(static_cast<size_t>(n));
  int64_t placed = 0;
  for (int64_t i = 0; i < n; ++i) {
    auto [it, fresh] = group_of_slot.try_emplace(batch.rows[size_t(i)].slot, 0);
    if (fresh) it->second = int(std::min<int64_t>(groups - 1, placed * groups / n));
    group[size_t(i)] = it->second;
    ++placed;
  }
  return group;
}

}  // namespace

void Transformer::set_groups(int groups, int64_t min_group_rows) {
  if (groups < 1 || groups > 64) throw InputError("row groups per step must be 1..64, not " + std::to_string(groups));
  if (min_group_rows < 1) throw InputError("rows per group must be at least 1");
  groups_ = groups;
  min_group_rows_ = min_group_rows;
}

void Transformer::forward_in_groups(const Batch& batch, float* x, KvCache& cache) {
  const int64_t n = batch.size(), d = cfg_.hidden_size, half = cfg_.qk_rope_head_dim / 2;
  dump_->next_step();
  dump_->dump(-1, "input", x, {n, d});
  // A dump is of whole tensors: then every row goes to the first group.
  std::vector<int> group_of = dump_->enabled() ? std::vector<int>(size_t(n), 0) : split_rows(batch, groups_, min_group_rows_);

  std::vector<Group> groups(static_cast<size_t>(groups_));
  for (int64_t i = 0; i < n; ++i) {
    Group& g = groups[size_t(group_of[size_t(i)])];
    g.rows.push_back(i);
    g.batch.rows.push_back(batch.rows[size_t(i)]);
  }
  uint64_t with_rows = 0;  // bit g: group g has rows (the backend skips the others' exchanges)
  for (size_t gi = 0; gi < groups.size(); ++gi)
    if (!groups[gi].rows.empty()) with_rows |= uint64_t(1) << gi;
  std::vector<Step> steps;
  steps.reserve(groups.size());
  for (Group& g : groups) {
    const int64_t m = g.batch.size();
    g.x.resize(size_t(m * d));
    g.h.resize(size_t(m * d));
    g.delta.resize(size_t(m * d));
    g.cos.resize(size_t(m * half));
    g.sin.resize(size_t(m * half));
    for (int64_t t = 0; t < m; ++t) {
      std::copy_n(x + g.rows[size_t(t)] * d, d, &g.x[size_t(t * d)]);
      rope_->tables(g.batch.rows[size_t(t)].pos, &g.cos[size_t(t * half)], &g.sin[size_t(t * half)]);
    }
    steps.push_back(Step{g.batch, g.cos.data(), g.sin.data(), *rope_, cache, pool_, act_, *dump_, phase_times_});
  }

  // The MoE layer a group has out comes back: its outputs, the combine, the residual.
  auto finish = [&](size_t gi) {
    Group& g = groups[gi];
    if (!g.pending) return;
    experts_->end();
    if (g.batch.size() > 0) {
      moe_end(cfg_, g.pending->moe, g.pending->layer, steps[gi], g.moe, g.h.data(), g.delta.data());
      finish_layer(cfg_, *g.pending, steps[gi], g.x.data(), g.delta.data());
    }
    g.pending = nullptr;
  };

  for (const LayerWeights& layer : weights_->layers) {
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      finish(gi);
      Group& g = groups[gi];
      const Step& step = steps[gi];
      if (g.batch.size() == 0) {
        if (layer.is_moe) {
          experts_->begin(ExpertRequest{layer.layer, 0, cfg_.num_experts_per_tok, d, nullptr, nullptr, nullptr,
                                        int(gi), with_rows});
          g.pending = &layer;
        }
        continue;
      }
      attention_block(cfg_, layer, step, g.x.data(), g.h.data(), g.delta.data());
      if (layer.is_moe) {
        moe_begin(cfg_, layer.moe, layer.layer, step, *experts_, g.h.data(), g.moe, int(gi), with_rows);
        g.pending = &layer;
      } else {
        mlp_forward(layer.mlp, g.h.data(), step.n(), g.delta.data(), step.act, step.pool);
        finish_layer(cfg_, layer, step, g.x.data(), g.delta.data());
      }
    }
    if (layer.is_moe) experts_->serve();
  }
  for (size_t gi = 0; gi < groups.size(); ++gi) finish(gi);

  for (const Group& g : groups)
    for (size_t t = 0; t < g.rows.size(); ++t) std::copy_n(&g.x[t * size_t(d)], d, x + g.rows[t] * d);
}

}  // namespace trillion
