#include "b1_floor.hpp"

#include <algorithm>

#include "bench_stats.hpp"
#include "kernels/matmul.hpp"
#include "config/layer_range.hpp"

namespace trillion::bench {

Floor b1_floor_matrices(const ModelConfig& cfg, TensorSource& src) {
  const ModelWeights w = ModelWeights::load(cfg, LayerRange{0, cfg.num_hidden_layers, true, true}, src);
  Floor f;
  auto add = [&](const char* part, const QMatrix& m, bool exact = false) { f.mats.push_back({part, m, exact}); };
  auto mlp = [&](const char* part, const MlpWeights& m) {
    for (const QMatrix* q : {&m.gate, &m.up, &m.down}) add(part, *q);
  };
  for (const LayerWeights& L : w.layers) {
    const AttentionWeights& a = L.attn;
    for (const QMatrix* q : a.has_q_lora ? std::vector<const QMatrix*>{&a.q_a, &a.q_b} : std::vector<const QMatrix*>{&a.q})
      add("attention", *q);
    add("attention", a.kv_a);
    f.mats.push_back({"W_UK", a.kv_b, true, -1, -1, 0, 1});  // kv_b's halves as attention.cpp runs them
    f.mats.push_back({"W_UV", a.kv_b, true, -1, -1, 0, 2});
    add("attention", a.o);
    if (!L.is_moe) {
      mlp("dense mlp", L.mlp);
      continue;
    }
    add("router", L.moe.gate, true);
    if (L.moe.has_shared) mlp("shared expert", L.moe.shared);
    f.experts.resize(size_t(L.layer + 1));
    for (int64_t e = 0; e < cfg.n_routed_experts; ++e) f.experts[size_t(L.layer)].push_back(load_expert(cfg, src, L.layer, e));
    for (int64_t slot = 0; slot < cfg.num_experts_per_tok; ++slot)
      for (int which = 0; which < 3; ++which) f.mats.push_back({"routed experts", QMatrix{}, false, L.layer, slot, which});
  }
  f.top_k = cfg.num_experts_per_tok;
  f.heads = cfg.num_attention_heads, f.nope = cfg.qk_nope_head_dim, f.v = cfg.v_head_dim, f.r = cfg.kv_lora_rank;
  add("lm_head", w.lm_head);
  return f;
}

FloorTimer::FloorTimer(Floor f, ThreadPool& pool, Activations act) : f_(std::move(f)), pool_(pool), act_(act) {
  int64_t rows = 0, cols = 0;
  for (const Floor::Mat& fm : f_.mats) {
    rows = std::max(rows, fm.m.rows), cols = std::max(cols, fm.m.cols);
    if (std::find(parts_.begin(), parts_.end(), fm.part) == parts_.end()) parts_.push_back(fm.part);
  }
  for (const auto& layer : f_.experts)
    for (const MlpWeights& w : layer)
      for (const QMatrix* q : {&w.gate, &w.up, &w.down}) rows = std::max(rows, q->rows), cols = std::max(cols, q->cols);
  x_.assign(size_t(cols), 0.01f);
  y_.resize(size_t(std::max(rows, f_.heads * std::max(f_.r, f_.v))));
  by_part_.resize(parts_.size());
}

size_t FloorTimer::part_of(const Floor::Mat& fm) const {
  return size_t(std::find(parts_.begin(), parts_.end(), fm.part) - parts_.begin());
}

void FloorTimer::pass() {
  std::vector<double> sec(parts_.size(), 0.0);
  bytes_.assign(parts_.size(), 0.0);
  for (const Floor::Mat& fm : f_.mats) {
    const QMatrix& m = matrix(fm);
    const auto t0 = Clock::now();
    if (fm.absorbed)
      absorbed(m, fm.absorbed);
    else
      linear(m, x_.data(), 1, y_.data(), fm.exact ? Activations::f32 : act_, pool_);
    sec[part_of(fm)] += since(t0);
    bytes_[part_of(fm)] += double(qmatrix_bytes(m)) * absorbed_share(fm.absorbed);
  }
  double total = 0;
  for (size_t i = 0; i < parts_.size(); ++i) by_part_[i].push_back(sec[i]), total += sec[i];
  totals_.push_back(total);
}

double FloorTimer::absorbed_share(int which) const {
  if (which == 0) return 1.0;
  return double(which == 1 ? f_.nope : f_.v) / double(f_.nope + f_.v);
}

void FloorTimer::absorbed(const QMatrix& kv_b, int which) {
  const int64_t H = f_.heads, nope = f_.nope, v = f_.v, r = f_.r;
  if (which == 1) pool_.parallel_for(H, 1, [&](int64_t h0, int64_t h1) {
    for (int64_t h = h0; h < h1; ++h)
      matmul_t_serial(kv_b.row_range(h * (nope + v), nope), x_.data(), 1, &y_[size_t(h * r)]);
  });
  if (which == 2) pool_.parallel_for(H, 1, [&](int64_t h0, int64_t h1) {
    for (int64_t h = h0; h < h1; ++h)
      matmul_serial(kv_b.row_range(h * (nope + v) + nope, v), x_.data(), 1, &y_[size_t(h * v)], H * v);
  });
}

const QMatrix& FloorTimer::matrix(const Floor::Mat& fm) const {
  if (fm.layer < 0) return fm.m;
  const auto& layer = f_.experts[size_t(fm.layer)];
  const MlpWeights& w = layer[size_t((int64_t(totals_.size()) * f_.top_k + fm.slot) % int64_t(layer.size()))];
  return fm.which == 0 ? w.gate : fm.which == 1 ? w.up : w.down;
}

nlohmann::json FloorTimer::json() const {
  nlohmann::json j;
  j["matmuls"] = f_.mats.size();
  j["passes"] = totals_.size();
  j["ms"] = median(totals_) * 1e3;
  for (size_t i = 0; i < parts_.size(); ++i) {
    j["parts_ms"][parts_[i]] = median(by_part_[i]) * 1e3;
    j["parts_mb"][parts_[i]] = bytes_[i] / 1e6;  // the same every pass (experts of one layer are alike)
  }
  return j;
}

}  // namespace trillion::bench
