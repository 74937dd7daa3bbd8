#include "parallel/expert.hpp"

#include <chrono>
#include <string>

#include "common/error.hpp"
#include "parallel/head_step.hpp"
#include "parallel/wire.hpp"

namespace trillion {
namespace {

using clock_type = std::chrono::steady_clock;
double since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

}  // namespace

int expert_groups(const RunShape& shape) { return shape.micro_batches > 0 ? shape.micro_batches : kDefaultRowGroups; }

ExpertRank::ExpertRank(RmaChannel& ch, const ModelConfig& cfg, TensorSource& source, ThreadPool& pool,
                       const Layout& layout, const RunShape& shape)
    : ch_(ch),
      cfg_(cfg),
      experts_(layout.ranks.at(size_t(ch.rank())).experts),
      local_(cfg, layout.ranks.at(size_t(ch.rank())).layers, source, pool, experts_, shape.activations),
      rma_(ch, local_, cfg.n_routed_experts),
      model_(cfg, layout.ranks.at(size_t(ch.rank())).layers, source, pool, &rma_, shape.activations),
      cache_(cfg, layout.ranks.at(size_t(ch.rank())).layers,
             std::max(1, KvPools::slots_in_pool(shape.slots, ch.size(), ch.rank())), shape.max_len,
             shape.kv_tokens > 0 ? shape.kv_tokens
                                 : KvPools::pool_blocks(KvPools::sized_slots(shape.slots, ch.size()), shape.max_len, 0) *
                                       KvPools::kBlockTokens) {
  model_.set_groups(expert_groups(shape), shape.min_group_rows);
  // Every rank holds the head in this mode, so every rank drafts for its own slots.
  if (shape.speculative) spec_ = std::make_unique<Speculator>(cfg, source, pool, shape, cache_.slots());
}

StepOutput ExpertRank::run_rows(uint64_t ticket, const StepInput& in) {
  auto t0 = clock_type::now();
  const double ex0 = rma_.exchange_seconds();
  const KvPools kv = pools();
  StepInput local = in;
  for (TokenRow& r : local.batch.rows) r.slot = kv.local_slot(r.slot);
  for (int32_t& s : local.batch.released) s = kv.local_slot(s);
  for (KvPrefixOp& op : local.batch.prefix_ops) op.slot = kv.local_slot(op.slot);
  const int64_t n = local.batch.size();
  std::vector<float> x(size_t(n * cfg_.hidden_size));
  model_.embed(local.tokens.data(), n, x.data());
  model_.forward(local.batch, x.data(), cache_);
  rma_.drain();  // our last expert outputs leave before the channel carries the result
  StepOutput out = head_step(model_, x.data(), local, spec_.get());
  out.ticket = ticket;
  const double exchange = rma_.exchange_seconds() - ex0;
  busy_ += since(t0) - exchange;
  wait_ += exchange;
  return out;
}

void ExpertRank::serve() {
  for (;;) {
    auto t0 = clock_type::now();
    Message m = ch_.recv(0);
    wait_ += since(t0);
    if (m.tag == kTagStop) return;
    if (m.tag != kTagStep)
      throw Error("protocol error: rank " + std::to_string(ch_.rank()) + " expected a step, got tag " +
                  std::to_string(m.tag));
    WireStep s = decode_step(m.data, cfg_.hidden_size);
    StepOutput out = run_rows(s.ticket, s.input);
    auto t1 = clock_type::now();
    ch_.send(0, kTagResult, encode_result(out));
    wait_ += since(t1);
  }
}

RankMetrics ExpertRank::metrics() const {
  RankMetrics m;
  m.rank = ch_.rank();
  m.role = "all layers, experts " + std::to_string(experts_.begin) + "-" + std::to_string(experts_.end - 1) +
           ", slots = " + std::to_string(ch_.rank()) + " mod " + std::to_string(ch_.size());
  fill_run_metrics(m, ch_.stats(), busy_, wait_, cache_.bytes() + (spec_ ? spec_->kv_cache_bytes() : 0));
  return m;
}

ExpertRunner::ExpertRunner(RmaChannel& ch, const ModelConfig& cfg, TensorSource& source, ThreadPool& pool,
                           const Layout& layout, const RunShape& shape)
    : rank_(ch, cfg, source, pool, layout, shape), slots_(shape.slots) {
  if (ch.rank() != 0) throw Error("ExpertRunner runs on rank 0");
}

void ExpertRunner::submit(uint64_t ticket, const StepInput& in) {
  if (stopped_) throw Error("ExpertRunner: submit after stop");
  RmaChannel& ch = rank_.channel();
  const int ranks = ch.size();
  const KvPools kv = rank_.pools();
  // Split the rows by owner rank; remember where each logit row came from.
  std::vector<StepInput> parts(static_cast<size_t>(ranks));
  std::vector<std::pair<int, size_t>> origin;  // per logit row of `in`: (rank, index in its part)
  size_t next_logit = 0;
  for (int64_t i = 0; i < in.batch.size(); ++i) {
    const TokenRow r = in.batch.rows[size_t(i)];
    if (r.slot < 0 || r.slot >= slots_) throw Error("ExpertRunner: slot " + std::to_string(r.slot) + " out of range");
    StepInput& p = parts[size_t(kv.pool_of(r.slot))];
    p.tokens.push_back(in.tokens[size_t(i)]);
    p.batch.rows.push_back(r);
    if (!in.mtp_next.empty()) p.mtp_next.push_back(in.mtp_next[size_t(i)]);
    if (next_logit < in.logit_rows.size() && in.logit_rows[next_logit] == i) {
      origin.push_back({kv.pool_of(r.slot), p.logit_rows.size()});
      p.logit_rows.push_back(p.batch.size() - 1);
      if (!in.sampling.empty()) p.sampling.push_back(in.sampling.at(next_logit));
      if (!in.drafts.empty()) p.drafts.push_back(in.drafts.at(next_logit));
      ++next_logit;
    }
  }
  for (auto& p : parts) p.return_logits = in.return_logits;
  for (int32_t s : in.batch.released) parts[size_t(kv.pool_of(s))].batch.released.push_back(s);  // to the slot's owner
  for (const KvPrefixOp& op : in.batch.prefix_ops) parts[size_t(kv.pool_of(op.slot))].batch.prefix_ops.push_back(op);
  auto t0 = clock_type::now();
  for (int r = 1; r < ranks; ++r) ch.send(r, kTagStep, encode_step(ticket, parts[size_t(r)], nullptr, 0));
  rank_.add_wait(since(t0));
  std::vector<StepOutput> outs(static_cast<size_t>(ranks));
  outs[0] = rank_.run_rows(ticket, parts[0]);
  for (int r = 1; r < ranks; ++r) {
    auto t1 = clock_type::now();
    Message m = ch.recv(r);
    rank_.add_wait(since(t1));
    if (m.tag != kTagResult)
      throw Error("protocol error: rank 0 expected a result from rank " + std::to_string(r));
    outs[size_t(r)] = decode_result(m.data, rank_.config().vocab_size);
  }
  StepOutput out;
  out.ticket = ticket;
  const int64_t vocab = rank_.config().vocab_size;
  for (auto [r, k] : origin) {
    out.tokens.push_back(outs[size_t(r)].tokens.at(k));
    out.logprobs.push_back(outs[size_t(r)].logprobs.at(k));
    out.top_logprobs.push_back(std::move(outs[size_t(r)].top_logprobs.at(k)));
    if (!outs[size_t(r)].drafts.empty()) out.drafts.push_back(outs[size_t(r)].drafts.at(k));
    if (in.return_logits) {
      const float* row = outs[size_t(r)].logits.data() + k * size_t(vocab);
      out.logits.insert(out.logits.end(), row, row + vocab);
    }
  }
  results_.push_back(std::move(out));
}

StepOutput ExpertRunner::next() {
  if (results_.empty()) throw Error("ExpertRunner::next: no step in flight");
  StepOutput out = std::move(results_.front());
  results_.pop_front();
  return out;
}

void ExpertRunner::stop() {
  if (stopped_) return;
  stopped_ = true;
  RmaChannel& ch = rank_.channel();
  for (int r = 1; r < ch.size(); ++r) ch.send(r, kTagStop, {});
}

}  // namespace trillion
