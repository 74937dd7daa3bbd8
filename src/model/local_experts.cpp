#include "model/local_experts.hpp"

#include <algorithm>
#include <atomic>
#include <numeric>
#include <string>

#include "common/error.hpp"
#include "kernels/matmul_q8.hpp"
#include "model/mlp.hpp"

namespace trillion {

LocalExperts::LocalExperts(const ModelConfig& cfg, const LayerRange& range, TensorSource& source, ThreadPool& pool,
                           Activations act)
    : LocalExperts(cfg, range, source, pool, ExpertRange{0, cfg.n_routed_experts}, act) {}

LocalExperts::LocalExperts(const ModelConfig& cfg, const LayerRange& range, TensorSource& source, ThreadPool& pool,
                           ExpertRange span, Activations act)
    : cfg_(cfg), range_(range), span_(span), pool_(pool), act_(act) {
  if (span.begin < 0 || span.end > cfg.n_routed_experts || span.begin > span.end)
    throw ConfigError("expert range [" + std::to_string(span.begin) + ", " + std::to_string(span.end) +
                      ") outside the model's " + std::to_string(cfg.n_routed_experts) + " experts");
  experts_.resize(size_t(std::max<int64_t>(range.size(), 0)));
  for (int64_t l = range.begin; l < range.end; ++l) {
    if (!cfg.is_moe_layer(l)) continue;
    auto& layer = experts_[size_t(l - range.begin)];
    for (int64_t e = span.begin; e < span.end; ++e) layer.push_back(load_expert(cfg, source, l, e));
  }
}

bool LocalExperts::holds(int64_t layer, int64_t expert) const {
  return range_.contains(layer) && cfg_.is_moe_layer(layer) && span_.contains(expert);
}

void LocalExperts::run(const ExpertRequest& req) {
  const int64_t d = req.hidden, k = req.top_k, pairs = req.n * k;
  if (d != cfg_.hidden_size) throw Error("LocalExperts: hidden size " + std::to_string(d) + " != model's");
  for (int64_t i = 0; i < pairs; ++i)
    if (!holds(req.layer, req.ids[i]))
      throw Error("LocalExperts: expert " + std::to_string(req.ids[i]) + " of layer " + std::to_string(req.layer) +
                  " is not held here");
  // (token, k) pairs ordered by expert, then token: each expert's tokens form one batch.
  std::vector<int64_t> order(static_cast<size_t>(pairs));
  for (int64_t i = 0; i < pairs; ++i) order[size_t(i)] = i;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return req.ids[a] < req.ids[b]; });
  struct Group {
    int32_t expert;
    size_t begin, end;  // its pairs: order[begin, end)
  };
  std::vector<Group> groups;
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j < order.size() && req.ids[order[j]] == req.ids[order[i]]) ++j;
    groups.push_back({req.ids[order[i]], i, j});
    i = j;
  }
  const auto& layer = experts_[size_t(req.layer - range_.begin)];
  // On the int8 path each token's row is quantized once here, not once per
  // expert it goes to (top_k times): quantization is per row, so an expert
  // that gathers its tokens' quantized rows gets the bits quantizing the
  // gathered floats would give (every expert of a layer has one format).
  // (Only where experts run one per thread: below, with fewer experts than
  // threads, each expert's products are split over the pool instead.)
  const int threads = pool_.size();
  const bool one_per_thread = int64_t(groups.size()) >= threads;
  const bool shared_q8 =
      one_per_thread && !groups.empty() && pair_uses_int8(layer.front().gate, layer.front().up, act_);
  Q8Rows xq_all;
  if (shared_q8) quantize_q8(req.x, req.n, d, xq_all, pair_quantize_format(layer.front().gate, layer.front().up));
  // Gathers a group's token rows xs [m, d] (or their quantized rows), runs
  // its expert, scatters ys [m, d] to out[(t, k)]. Serial or pool-parallel
  // matmuls give the same bits.
  auto run_group = [&](const Group& g, std::vector<float>& xs, std::vector<float>& ys, bool serial) {
    const int64_t m = int64_t(g.end - g.begin);
    ys.resize(size_t(m * d));
    const MlpWeights& w = layer[size_t(g.expert - span_.begin)];
    if (serial && shared_q8) {
      thread_local Q8Rows xq;
      thread_local std::vector<int64_t> tokens;
      tokens.resize(size_t(m));
      for (int64_t a = 0; a < m; ++a) tokens[size_t(a)] = order[g.begin + size_t(a)] / k;
      q8_gather(xq_all, tokens.data(), m, xq);
      mlp_forward_serial_q8(w, xq, ys.data(), act_);
    } else {
      xs.resize(size_t(m * d));
      for (int64_t a = 0; a < m; ++a) std::copy_n(req.x + (order[g.begin + size_t(a)] / k) * d, d, &xs[size_t(a * d)]);
      if (serial)
        mlp_forward_serial(w, xs.data(), m, ys.data(), act_);
      else
        mlp_forward(w, xs.data(), m, ys.data(), act_, pool_);
    }
    for (int64_t a = 0; a < m; ++a) std::copy_n(&ys[size_t(a * d)], d, req.out + order[g.begin + size_t(a)] * d);
  };
  if (one_per_thread) {  // enough experts to give each thread its own
    // Largest first (an expert streams its weights once, then works per
    // token: ~ 1 + m in one-token matvec units), each claimed by the next
    // thread to get free: list scheduling, so a core that runs slow (an
    // efficiency core, a preempted vCPU) costs its share, not the layer
    // (a fixed plan made the fast thread wait for the slow one's half).
    // Which thread runs an expert never changes its bits.
    std::vector<double> cost(groups.size());
    double total = 0;
    for (size_t i = 0; i < groups.size(); ++i) total += cost[i] = double(1 + groups[i].end - groups[i].begin);
    // The shared expert, when offered, is job groups.size(), unless it alone
    // is more than a thread's share (then the pool's split of its products
    // balances better, and the caller runs it). Its cost scales with its width.
    const MlpWeights& routed0 = layer.front();
    if (req.shared && req.shared_out && req.shared_done) {
      const double width = double(req.shared->gate.rows) / double(std::max<int64_t>(1, routed0.gate.rows));
      const double c = double(1 + req.n) * width;
      if (c * threads <= total + c) cost.push_back(c);
    }
    std::vector<size_t> by_cost(cost.size());
    std::iota(by_cost.begin(), by_cost.end(), size_t(0));
    std::stable_sort(by_cost.begin(), by_cost.end(), [&](size_t a, size_t b) { return cost[a] > cost[b]; });
    // The shared expert on one thread has mlp_forward's bits
    // (serial and pool products agree); with the rows quantized above when
    // its gate and up quantize x as the routed experts' do.
    auto run_shared = [&] {
      const MlpWeights& w = *req.shared;
      if (shared_q8 && pair_uses_int8(w.gate, w.up, act_) &&
          pair_quantize_format(w.gate, w.up) == pair_quantize_format(routed0.gate, routed0.up))
        mlp_forward_serial_q8(w, xq_all, req.shared_out, act_);
      else
        mlp_forward_serial(w, req.x, req.n, req.shared_out, act_);
    };
    std::atomic<size_t> next{0};
    pool_.parallel_for(threads, 1, [&](int64_t, int64_t) {
      std::vector<float> xs, ys;
      for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < by_cost.size();) {
        if (by_cost[i] == groups.size())
          run_shared();
        else
          run_group(groups[by_cost[i]], xs, ys, true);
      }
    });
    if (cost.size() > groups.size()) *req.shared_done = true;
  } else {
    std::vector<float> xs, ys;
    for (const Group& g : groups) run_group(g, xs, ys, false);
  }
}

}  // namespace trillion
