#include "plan/predict.hpp"

#include <algorithm>
#include <cmath>

#include "common/error.hpp"
#include "plan/partition.hpp"

namespace trillion {
namespace {

// Seconds of a piece of work, split by what it waits for.
struct Time {
  double memory = 0, compute = 0, link = 0;
  double total() const { return memory + compute + link; }
  Time& operator+=(const Time& o) {
    memory += o.memory;
    compute += o.compute;
    link += o.link;
    return *this;
  }
  Time scaled(double f) const { return {memory * f, compute * f, link * f}; }
};
Time slower(const Time& a, const Time& b) { return a.total() >= b.total() ? a : b; }

// One rank as it runs: its host's figures, its threads, its share of the
// bandwidth, and the share of its cores it gets when busy ranks outnumber
// them (time-slicing: every second of work takes 1/share seconds).
struct RankCtx {
  const HostProfile* host = nullptr;
  int threads = 1;
  double bandwidth = 1;
  double core_share = 1;
};

// A roofline segment: bytes streamed and FLOP at `rate` overlap; the slower
// decides. (A weight matrix's rate is its kernel's measured with the weights
// streaming, HostProfile::weight_rate: what the kernel cannot overlap is in it.)
Time roofline(double bytes, double flop, double rate, const RankCtx& c, double fixed = 0) {
  const double mem = bytes / c.bandwidth / c.core_share;
  const double comp = flop / (rate * double(c.threads)) / c.core_share;
  const double t = std::max(mem, comp) + fixed;
  return mem >= comp ? Time{t, 0, 0} : Time{0, t, 0};
}

Time call(const MatrixCost& m, double rows, const RankCtx& c) {
  if (rows <= 0 || m.rows == 0) return {};
  return roofline(double(m.bytes), m.flop_per_row() * rows, c.host->weight_rate(m.kernel, rows), c,
                  c.host->dispatch_seconds);
}

// Attention over the cache for `rows` rows of `seqs` sequences at mean position `pos`.
Time cache_attention(const ModelCost& mc, double rows, double seqs, double pos, const RankCtx& c) {
  if (rows <= 0) return {};
  return roofline(seqs * pos * double(mc.cache_bytes_per_position()), rows * (pos + 1) * mc.cache_flop_per_position(),
                  c.host->vector_flops_per_core, c);
}

// Routed experts of one layer: `held` of the model's experts receive `pairs`
// (token, expert) pairs from `tokens` distinct tokens.
Time experts(const ModelCost& mc, const LayerCost& L, double held, double tokens, const RankCtx& c) {
  if (tokens <= 0 || held <= 0) return {};
  const double touched = held / double(mc.n_experts) * expected_experts_touched(mc.n_experts, mc.top_k, tokens);
  const double pairs = tokens * double(mc.top_k) * held / double(mc.n_experts);
  const double rows = pairs / touched;  // per touched expert
  Time t;
  for (const MatrixCost& m : L.expert) {
    Time one = roofline(double(m.bytes), m.flop_per_row() * rows, c.host->weight_rate(m.kernel, rows), c);
    t += one.scaled(touched);
  }
  return t;
}

// Attention (+ the dense MLP or the router and shared experts) of one layer for `rows` rows.
Time layer_dense(const ModelCost& mc, const LayerCost& L, double rows, double seqs, double pos, const RankCtx& c) {
  Time t;
  for (const MatrixCost& m : L.attention) t += call(m, rows, c);
  t += cache_attention(mc, rows, seqs, pos, c);
  for (const MatrixCost& m : L.mlp) t += call(m, rows, c);
  if (L.moe) t += call(L.router, rows, c);
  return t;
}

// What one step has: rows, sequences, the mean cached position, logit rows.
struct StepShape {
  double rows, seqs, pos, logits;
};

// The machine a rank runs on, and how many ranks share it: its host's, or
// with emulated hosts the one machine's (hosts[0]) and every rank.
const HostProfile& machine_of(const ClusterProfile& cl, int rank) {
  return cl.hosts[size_t(cl.one_machine ? 0 : cl.host_of_rank[size_t(rank)])];
}
int ranks_on_machine_of(const ClusterProfile& cl, int rank) {
  return cl.one_machine ? int(cl.host_of_rank.size()) : cl.ranks_on(cl.host_of_rank[size_t(rank)]);
}

// `busy`: how many ranks of the rank's host (of the whole machine when the
// hosts are emulated on one) work at the same time.
RankCtx rank_ctx(const ClusterProfile& cl, int rank, int busy) {
  RankCtx c;
  const int h = cl.host_of_rank[size_t(rank)];
  const int N = int(cl.host_of_rank.size());
  c.host = &machine_of(cl, rank);
  const int cores = c.host->cores;
  const int ranks_here = ranks_on_machine_of(cl, rank);
  busy = std::min(std::max(1, busy), ranks_here);
  if (cl.one_machine) {
    // Host i is pinned to core i mod cores: its threads share that one core
    // with the other busy hosts pinned there.
    int on_core = 0;
    for (int q = 0; q < N; ++q) on_core += cl.host_of_rank[size_t(q)] % cores == h % cores;
    const int busy_on_core = std::max(1, int(std::ceil(double(on_core) * busy / double(N))));
    c.threads = 1;
    c.core_share = 1.0 / busy_on_core;
  } else {
    // Threads beyond the cores left by the host's other busy ranks add
    // nothing; with more busy ranks than cores each gets a slice.
    c.threads = std::max(1, std::min(cl.threads_of(rank), std::max(1, cores / busy)));
    c.core_share = std::min(1.0, double(cores) / double(busy * c.threads));
  }
  // Bandwidth is shared by the ranks running at a moment, not by all busy
  // ones: the time-sliced rest waits (core_share) without reading.
  const int running = std::min(busy, std::max(1, cores / c.threads));
  c.bandwidth = c.host->rank_bandwidth(c.threads, running);
  return c;
}

Time hop(const LinkProfile& l, double bytes) { return {0, 0, l.hop_seconds(bytes)}; }

// What a message costs beyond its link when it finds `rank` waiting for
// `waited` seconds: where the rank's machine runs more ranks x threads than
// it has cores, a wait sleeps once it has lasted kWakeAfterSeconds, and
// notices the message wake_seconds late (the host's profile).
// Elsewhere a wait polls and the link's latency is the whole of it.
Time wake(const ClusterProfile& cl, int rank, double waited) {
  const HostProfile& host = machine_of(cl, rank);
  const int threads = cl.one_machine ? 1 : cl.threads_of(rank);  // as rank_ctx: one thread per emulated host
  const bool sleeps = ranks_on_machine_of(cl, rank) * threads > host.cores;
  return sleeps && waited > kWakeAfterSeconds ? Time{0, 0, host.wake_seconds} : Time{};
}

Prediction finish(const char* mode, const char* phase, int64_t batch, double tokens, const Time& step,
                  double group_latency, double group_tokens) {
  Prediction p;
  p.mode = mode;
  p.phase = phase;
  p.batch = batch;
  p.step_seconds = step.total();
  p.tokens_per_s = tokens / p.step_seconds;
  p.memory_seconds = step.memory;
  p.compute_seconds = step.compute;
  p.link_seconds = step.link;
  p.group_latency_seconds = group_latency;
  p.metrics_tokens_per_s = group_tokens / group_latency;
  p.bound = step.link >= std::max(step.memory, step.compute) ? "link"
            : step.memory >= step.compute                    ? "memory"
                                                             : "compute";
  return p;
}

// lm_head rows [begin, end) as a matrix of their own (a split head's share).
MatrixCost head_rows(const ModelCost& mc, int64_t begin, int64_t end) {
  MatrixCost m = mc.lm_head;
  if (mc.lm_head.rows > 0 && end - begin != mc.lm_head.rows) {
    m.bytes = int64_t(double(m.bytes) * double(end - begin) / double(mc.lm_head.rows));
    m.rows = end - begin;
  }
  return m;
}

// One stage's work for one group.
Time stage_time(const ModelCost& mc, const RankShare& share, const StepShape& s, const RankCtx& c) {
  Time t;
  for (int64_t l = share.layers.begin; l < share.layers.end; ++l) {
    const LayerCost& L = mc.layers[size_t(l)];
    t += layer_dense(mc, L, s.rows, s.seqs, s.pos, c);
    if (L.moe) t += experts(mc, L, double(share.experts.size()), s.rows, c);
  }
  if (share.layers.holds_head_rows())
    t += call(head_rows(mc, share.layers.head_begin(), share.layers.head_end(mc.vocab)), s.logits, c);
  return t;
}

Prediction pipeline(const ModelCost& mc, const Layout& layout, const ClusterProfile& cl, const char* phase,
                    int64_t batch, int groups, const StepShape& s, double tokens, double group_tokens) {
  const int N = layout.size();
  std::vector<Time> work(static_cast<size_t>(N));
  double all_work = 0;
  for (int r = 0; r < N; ++r) {
    // Stages of one host run at once only when several groups are in flight.
    work[size_t(r)] = stage_time(mc, layout.ranks[size_t(r)], s, rank_ctx(cl, r, groups));
    all_work += work[size_t(r)].total();
  }
  Time sum, slowest;
  for (int r = 0; r < N; ++r) {
    Time t = work[size_t(r)];
    // Activations to the next stage; from the last, the chosen tokens, or
    // with a split head the normed rows and the last stage's logit columns.
    const int64_t split = layout.ranks[size_t(r)].layers.head_split;
    const double bytes = r + 1 < N   ? s.rows * double(mc.hidden) * 4 + 64
                         : split > 0 ? s.logits * double(mc.hidden + mc.vocab - split) * 4 + 64
                                     : s.logits * 16 + 64;
    const int next = (r + 1) % N;
    if (N > 1) t += hop(cl.link_between(r, next), bytes);
    // With one group in flight the next stage has waited out the rest of
    // the round (with several it is mostly busy with another group's step).
    if (N > 1 && groups == 1) t += wake(cl, next, all_work - work[size_t(next)].total());
    sum += t;
    slowest = slower(slowest, t);
  }
  const Time round = slower(slowest.scaled(groups), sum);
  // A group resubmits as soon as its tokens are back, so its submit-to-result
  // time is the round, queueing at the slowest stage included.
  return finish("pipeline", phase, batch, tokens, round, round.total(), group_tokens);
}

// P(a token has at least one of its k experts among `held` of E).
double touches(int64_t E, int64_t k, double held) {
  double none = 1;
  for (int64_t i = 0; i < k; ++i) none *= std::max(0.0, (double(E) - held - double(i)) / double(E - i));
  return 1 - none;
}

// `groups`: row groups per rank taking turns at the MoE layers
// (Transformer::set_groups; whole sequences each, so at most one a sequence).
Prediction expert(const ModelCost& mc, const Layout& layout, const ClusterProfile& cl, const char* phase, int64_t batch,
                  const std::vector<StepShape>& per_rank, double tokens, int groups, int64_t min_group_rows) {
  const int N = layout.size();
  std::vector<RankCtx> ctx;
  // Every rank works at once (rank_ctx caps it at the ranks sharing its host).
  for (int r = 0; r < N; ++r) ctx.push_back(rank_ctx(cl, r, N));
  double all_rows = 0;
  for (const auto& s : per_rank) all_rows += s.rows;
  // All-to-all: every rank sends to every other at once; the slowest pair
  // (per-pair links between hosts; one host's pairs share its memory) decides.
  auto exchange = [&](auto bytes_rq) {
    double worst = 0;
    for (int r = 0; r < N; ++r) {
      double local = 0, remote = 0;
      for (int q = 0; q < N; ++q) {
        if (q == r) continue;
        const double b = bytes_rq(r, q) + 16;
        if (cl.host_of_rank[size_t(r)] == cl.host_of_rank[size_t(q)])
          local += b;
        else
          remote = std::max(remote, b);
      }
      worst = std::max({worst, local > 0 ? cl.local.hop_seconds(local) : 0.0,
                        remote > 0 ? cl.link.hop_seconds(remote) : 0.0});
    }
    return Time{0, 0, worst};
  };
  const double d4 = double(mc.hidden) * 4, k = double(mc.top_k);
  // Groups a rank's rows actually form (Transformer::set_groups): whole
  // sequences, so at most one a sequence, and at least min_group_rows rows each.
  std::vector<double> g(static_cast<size_t>(N));
  double g_max = 1;
  for (int r = 0; r < N; ++r) {
    const StepShape& s = per_rank[size_t(r)];
    const double by_rows = std::floor(s.rows / double(std::max<int64_t>(1, min_group_rows)));
    g[size_t(r)] = std::max(1.0, std::min({double(std::max(1, groups)), s.seqs, by_rows}));
    g_max = std::max(g_max, g[size_t(r)]);
  }
  // Each group's rows pass a layer's attention and dense weights on their own
  // (the weights stream once per group); the exchanges of a MoE layer go out
  // group by group. Of each exchange the last group's share is always
  // waited for (serve needs every group's dispatch; the first group's
  // combine is awaited before its next layer starts); the rest of the link
  // time hides behind the other groups' attention, as far as that lasts.
  // With one group that is the whole exchange.
  auto exposed = [&](const Time& whole, const Time& last_share, double hidden) {
    return Time{0, 0, std::max(last_share.link, whole.link - hidden)};
  };
  Time step;
  for (const LayerCost& L : mc.layers) {
    Time a;
    double hidden = 1e300;  // the least attention time any rank has behind which its exchanges travel
    std::vector<double> own(static_cast<size_t>(N));
    for (int r = 0; r < N; ++r) {
      const StepShape& s = per_rank[size_t(r)];
      const double gr = g[size_t(r)];
      const Time one = s.rows > 0 ? layer_dense(mc, L, s.rows / gr, s.seqs / gr, s.pos, ctx[size_t(r)]) : Time{};
      Time t = one.scaled(gr);
      if (N == 1 && L.moe) t += experts(mc, L, double(mc.n_experts), s.rows, ctx[size_t(r)]);
      a = slower(a, t);
      own[size_t(r)] = t.total();
      hidden = std::min(hidden, one.total() * (gr - 1));
    }
    step += a;
    if (!L.moe || N == 1) continue;
    // A rank with less attention than the slowest waits for its dispatch the
    // difference (at batch 1: all but the sequence's rank, the whole of it).
    Time late;
    for (int r = 0; r < N; ++r) late = slower(late, wake(cl, r, a.total() - own[size_t(r)]));
    step += late;
    auto held = [&](int q) { return double(layout.ranks[size_t(q)].experts.size()); };
    auto dispatch = [&](double share) {
      return exchange([&](int r, int q) {
        return share * per_rank[size_t(r)].rows * (touches(mc.n_experts, mc.top_k, held(q)) * d4 +
                                                   k * held(q) / double(mc.n_experts) * 8);
      });
    };
    auto combine = [&](double share) {
      return exchange([&](int r, int q) { return share * per_rank[size_t(r)].rows * k * held(q) / double(mc.n_experts) * d4; });
    };
    step += exposed(dispatch(1), dispatch(1 / g_max), hidden);
    Time c;  // every group's pairs in one pass over the experts (RmaExperts::serve)
    for (int q = 0; q < N; ++q) c = slower(c, experts(mc, L, held(q), all_rows, ctx[size_t(q)]));
    step += c;
    step += exposed(combine(1), combine(1 / g_max), hidden);
  }
  Time head;
  for (int r = 0; r < N; ++r) head = slower(head, call(mc.lm_head, per_rank[size_t(r)].logits, ctx[size_t(r)]));
  step += head;
  if (N > 1) step += Time{0, 0, 2 * cl.link_between(0, N - 1).latency};  // the step out, the results back
  return finish("expert", phase, batch, tokens, step, step.total(), tokens);
}

}  // namespace

int ClusterProfile::ranks_on(int host) const {
  return int(std::count(host_of_rank.begin(), host_of_rank.end(), host));
}

int ClusterProfile::threads_of(int rank) const {
  if (threads > 0) return threads;
  const int h = host_of_rank[size_t(rank)];
  return std::max(1, hosts[size_t(h)].cores / std::max(1, ranks_on(h)));
}

std::vector<Prediction> predict(const ModelCost& mc, const Layout& layout, const ClusterProfile& cl,
                                const PredictOptions& o) {
  const int N = layout.size();
  if (int(cl.host_of_rank.size()) != N) throw Error("predict: host_of_rank does not match the layout");
  std::vector<Prediction> out;
  const double ctx = double(o.context);
  if (layout.mode == ParallelMode::pipeline) {
    const int M = o.micro_batches > 0 ? o.micro_batches : N;
    for (int64_t B : o.batches) {
      const int groups = int(std::min<int64_t>(M, B));
      const double b = std::ceil(double(B) / double(groups));
      out.push_back(pipeline(mc, layout, cl, "decode", B, groups, StepShape{b, b, ctx, b}, double(B), double(B) / groups));
    }
    const double P = double(o.prefill_tokens);
    out.push_back(pipeline(mc, layout, cl, "prefill", o.prefill_tokens, 1, StepShape{P, 1, P / 2, 1}, P, P));
  } else {
    const int expert_groups = o.micro_batches > 0 ? o.micro_batches : kDefaultRowGroups;
    for (int64_t B : o.batches) {
      std::vector<StepShape> per(static_cast<size_t>(N));
      for (int r = 0; r < N; ++r) {
        const double b = double(B / N + (r < B % N ? 1 : 0));  // slot s on rank s mod N
        per[size_t(r)] = StepShape{b, b, ctx, b};
      }
      out.push_back(expert(mc, layout, cl, "decode", B, per, double(B), expert_groups, o.min_group_rows));
    }
    std::vector<StepShape> per(size_t(N), StepShape{0, 0, 0, 0});
    const double P = double(o.prefill_tokens);
    per[0] = StepShape{P, 1, P / 2, 1};
    out.push_back(expert(mc, layout, cl, "prefill", o.prefill_tokens, per, P, expert_groups, o.min_group_rows));
  }
  return out;
}

StagePlan time_balanced_stages(const ModelCost& mc, const HostProfile& host, int threads, int ranks, double rows,
                               int64_t context, bool split_head) {
  RankCtx c;
  c.host = &host;
  c.threads = std::max(1, std::min(threads > 0 ? threads : host.cores, host.cores));
  c.bandwidth = host.rank_bandwidth(c.threads, 1);
  rows = std::max(1.0, rows);
  // Picoseconds as integers: balance_pipeline's exact arithmetic and tie rule.
  auto ps = [](const Time& t) { return int64_t(std::llround(t.total() * 1e12)); };
  std::vector<int64_t> layer;
  for (const LayerCost& L : mc.layers) {
    Time t = layer_dense(mc, L, rows, rows, double(context), c);
    if (L.moe) t += experts(mc, L, double(mc.n_experts), rows, c);
    layer.push_back(ps(t));
  }
  // Every head split in steps of kHeadSplitStep rows (none first; with one
  // rank none at all), each with its best layer split; the smallest slowest
  // stage wins, ties to the smaller split.
  StagePlan best;
  int64_t best_cost = -1;
  const int64_t V = mc.vocab;
  for (int64_t split = 0; split < (ranks > 1 && split_head ? V : 1); split += kHeadSplitStep) {
    const int64_t first = split > 0 ? ps(call(head_rows(mc, 0, split), rows, c)) : 0;
    const int64_t last = ps(call(head_rows(mc, split, V), rows, c));
    const std::vector<LayerRange> stages = balance_pipeline(layer, first, last, ranks);
    int64_t cost = 0;
    for (size_t r = 0; r < stages.size(); ++r) {
      int64_t t = r == 0 ? first : 0;
      if (r + 1 == stages.size()) t += last;
      for (int64_t l = stages[r].begin; l < stages[r].end; ++l) t += layer[size_t(l)];
      cost = std::max(cost, t);
    }
    if (best_cost >= 0 && cost >= best_cost) continue;
    best_cost = cost;
    best.head_split = split;
    best.stages.clear();
    for (const LayerRange& r : stages) {
      if (!best.stages.empty()) best.stages += ',';
      best.stages += std::to_string(r.begin) + '-' + std::to_string(r.end - 1);
    }
  }
  return best;
}

StagePlan auto_stages(const ModelCost& mc, const HostProfile& host, int threads, int ranks, int32_t max_batch,
                      int micro_batches, int64_t max_len) {
  const int groups = std::max(1, std::min(micro_batches > 0 ? micro_batches : ranks, int(max_batch)));
  // One group in flight visits the stages in turn: balance gains nothing,
  // and a split head would only add its hand-back to every step.
  return time_balanced_stages(mc, host, threads > 0 ? threads : host.cores, ranks,
                              std::ceil(double(max_batch) / groups), std::min<int64_t>(256, max_len - 1), groups > 1);
}

StagePlan resolve_stage_plan(const std::string& stages, const std::string& head_split, bool pipeline, bool may_split,
                             const std::function<StagePlan()>& auto_plan) {
  StagePlan out{stages, parse_head_split(head_split)};
  if (stages == "auto" && pipeline) {
    const StagePlan plan = auto_plan();
    out.stages = plan.stages;
    if (out.head_split < 0) out.head_split = may_split ? plan.head_split : 0;
  } else if (head_split == "auto") {
    throw InputError("--head-split auto goes with --parallel pipeline --stages auto");
  }
  out.head_split = std::max<int64_t>(0, out.head_split);
  return out;
}

RunLayout resolve_layout(const ModelConfig& cfg, const ModelSizes& sizes, ParallelMode mode, int ranks,
                         const std::string& stages, const std::string& head_split, bool whole_head,
                         const std::function<StagePlan()>& auto_plan) {
  RunLayout out;
  out.stages = resolve_stage_plan(stages, head_split, takes_stages(mode), !whole_head, auto_plan);
  if (whole_head && out.stages.head_split > 0)
    throw InputError("--speculative mtp needs the whole head on the last stage: run without --head-split");
  out.layout = make_layout(cfg, sizes, mode, ranks, out.stages.stages, out.stages.head_split);
  return out;
}

}  // namespace trillion
