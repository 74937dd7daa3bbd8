#include "parallel/pipeline.hpp"

#include <chrono>
#include <cstring>
#include <string>

#include "common/error.hpp"
#include "parallel/head_step.hpp"
#include "parallel/wire.hpp"
#include "runtime/backoff.hpp"

namespace trillion {
namespace {

using clock_type = std::chrono::steady_clock;
double since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

}  // namespace

PipelineStage::PipelineStage(RmaChannel& ch, const ModelConfig& cfg, TensorSource& source, ThreadPool& pool,
                             const Layout& layout, const RunShape& shape)
    : ch_(ch),
      cfg_(cfg),
      layout_(layout),
      range_(layout.ranks.at(size_t(ch.rank())).layers),
      model_(cfg, range_, source, pool, nullptr, shape.activations),
      cache_(cfg, range_, shape.slots, shape.max_len, shape.kv_tokens) {
  // The MTP layer lives where the head does: the last stage.
  if (shape.speculative && range_.has_head)
    spec_ = std::make_unique<Speculator>(cfg, source, pool, shape, shape.slots);
  if (shape.speculative && range_.head_split > 0)
    throw InputError("--speculative mtp needs the whole head on the last stage: run without --head-split");
}

void PipelineStage::run_and_forward(uint64_t ticket, const StepInput& in, std::vector<float>& x) {
  auto t0 = clock_type::now();
  model_.forward(in.batch, x.data(), cache_);
  const bool last = ch_.rank() == ch_.size() - 1;
  std::vector<std::byte> msg;
  int dest;
  if (last && range_.head_split > 0) {
    msg = encode_head_part(head_part(ticket, in, x.data()), cfg_.hidden_size);
    dest = 0;
  } else if (last) {
    StepOutput out = head_step(model_, x.data(), in, spec_.get());
    out.ticket = ticket;
    msg = encode_result(out);
    dest = 0;
  } else {
    msg = encode_step(ticket, in, x.data(), cfg_.hidden_size);
    dest = ch_.rank() + 1;
  }
  busy_ += since(t0);
  auto t1 = clock_type::now();
  ch_.send(dest, !last ? kTagStep : range_.head_split > 0 ? kTagHeadPart : kTagResult, msg);
  wait_ += since(t1);
}

HeadPart PipelineStage::head_part(uint64_t ticket, const StepInput& in, const float* x) const {
  const int64_t d = cfg_.hidden_size, m = int64_t(in.logit_rows.size());
  HeadPart p;
  p.ticket = ticket;
  p.m = m;
  p.cols = model_.head_rows();
  const std::vector<float> rows = logit_rows_of(x, in, d);
  p.h.resize(size_t(m * d));
  p.logits.resize(size_t(m * p.cols));
  model_.final_norm(rows.data(), m, p.h.data());
  model_.head(p.h.data(), m, p.logits.data());
  return p;
}

void PipelineStage::serve() {
  const int prev = ch_.rank() - 1;
  for (;;) {
    auto t0 = clock_type::now();
    Message m = ch_.recv(prev);
    wait_ += since(t0);
    if (m.tag == kTagStop) {
      if (ch_.rank() + 1 < ch_.size()) ch_.send(ch_.rank() + 1, kTagStop, {});
      return;
    }
    if (m.tag != kTagStep)
      throw Error("protocol error: stage " + std::to_string(ch_.rank()) + " got tag " + std::to_string(m.tag));
    WireStep s = decode_step(m.data, cfg_.hidden_size);
    if (s.x.size() != size_t(s.input.batch.size() * cfg_.hidden_size))
      throw Error("protocol error: step without activations at stage " + std::to_string(ch_.rank()));
    run_and_forward(s.ticket, s.input, s.x);
  }
}

RankMetrics PipelineStage::metrics() const {
  RankMetrics m;
  m.rank = ch_.rank();
  const std::string head =
      range_.head_split > 0 && range_.holds_head_rows()
          ? " + head rows " + std::to_string(range_.head_begin()) + "-" + std::to_string(range_.head_end(cfg_.vocab_size) - 1)
      : range_.has_head ? " + head"
                        : "";
  m.role = "stage " + std::to_string(ch_.rank()) + ": layers " + std::to_string(range_.begin) + "-" +
           std::to_string(range_.end - 1) + (range_.has_embed ? " + embed" : "") + head + (spec_ ? " + MTP" : "");
  fill_run_metrics(m, ch_.stats(), busy_, wait_, cache_.bytes() + (spec_ ? spec_->kv_cache_bytes() : 0));
  return m;
}

PipelineRunner::PipelineRunner(RmaChannel& ch, const ModelConfig& cfg, TensorSource& source, ThreadPool& pool,
                               const Layout& layout, const RunShape& shape)
    : PipelineStage(ch, cfg, source, pool, layout, shape),
      micro_batches_(shape.micro_batches > 0 ? shape.micro_batches : ch.size()) {
  if (ch.rank() != 0) throw Error("PipelineRunner runs on rank 0");
}

void PipelineRunner::drain_results(bool block) {
  const int last = ch_.size() - 1;
  for (;;) {
    std::optional<Message> m;
    auto t0 = clock_type::now();
    if (block) {
      m = ch_.recv(last);
    } else {
      m = ch_.try_recv(last);
      if (!m) return;
    }
    wait_ += since(t0);
    if (range_.head_split > 0) {
      if (m->tag != kTagHeadPart)
        throw Error("protocol error: rank 0 expected a head part, got tag " + std::to_string(m->tag));
      auto t1 = clock_type::now();
      results_.push_back(finish_head(decode_head_part(m->data, cfg_.hidden_size, cfg_.vocab_size - range_.head_split)));
      busy_ += since(t1);
    } else {
      if (m->tag != kTagResult)
        throw Error("protocol error: rank 0 expected a result, got tag " + std::to_string(m->tag));
      results_.push_back(decode_result(m->data, cfg_.vocab_size));
    }
    --in_flight_;
    if (block) return;
  }
}

void PipelineRunner::submit(uint64_t ticket, const StepInput& in) {
  if (stopped_) throw Error("PipelineRunner: submit after stop");
  const int64_t n = in.batch.size();
  std::vector<float> x(size_t(n * cfg_.hidden_size));
  auto t0 = clock_type::now();
  model_.embed(in.tokens.data(), n, x.data());
  if (ch_.size() == 1) {
    model_.forward(in.batch, x.data(), cache_);
    StepOutput out = head_step(model_, x.data(), in, spec_.get());
    out.ticket = ticket;
    results_.push_back(std::move(out));
    busy_ += since(t0);
    return;
  }
  model_.forward(in.batch, x.data(), cache_);
  const std::vector<std::byte> msg = encode_step(ticket, in, x.data(), cfg_.hidden_size);
  busy_ += since(t0);
  if (range_.head_split > 0) pending_.push_back({ticket, in});
  ++in_flight_;
  // Never block on rank 1's ring while results wait for us: the last stage
  // could be blocked on our ring, and rank 1 on its successor (a cycle).
  auto t1 = clock_type::now();
  const double busy_before = busy_, wait_before = wait_;
  Backoff backoff = ch_.backoff();
  while (!ch_.try_send(1, kTagStep, msg)) {
    drain_results(false);
    backoff.pause();
  }
  // drain_results counts its own wait and a split head's work: the rest is this wait.
  wait_ += since(t1) - (busy_ - busy_before) - (wait_ - wait_before);
}

// Rank 0's half of a split head: its lm_head rows of the normed rows the last
// stage sent, the logits assembled in vocabulary order, and the choice. The
// same kernels on the same rows as an unsplit head: the same bits.
StepOutput PipelineRunner::finish_head(HeadPart part) {
  if (pending_.empty() || pending_.front().first != part.ticket)
    throw Error("protocol error: head part for step " + std::to_string(part.ticket) + " out of order");
  const StepInput in = std::move(pending_.front().second);
  pending_.pop_front();
  const int64_t m = part.m, split = range_.head_split, vocab = cfg_.vocab_size;
  if (m != int64_t(in.logit_rows.size())) throw Error("protocol error: head part rows do not match the step");
  std::vector<float> first(size_t(m * split));
  model_.head(part.h.data(), m, first.data());
  StepOutput out;
  out.ticket = part.ticket;
  out.logits.resize(size_t(m * vocab));
  for (int64_t i = 0; i < m; ++i) {
    std::memcpy(&out.logits[size_t(i * vocab)], &first[size_t(i * split)], size_t(split) * sizeof(float));
    std::memcpy(&out.logits[size_t(i * vocab + split)], &part.logits[size_t(i * (vocab - split))],
                size_t(vocab - split) * sizeof(float));
  }
  choose_tokens(cfg_, in, out);
  return out;
}

StepOutput PipelineRunner::next() {
  if (results_.empty()) {
    if (in_flight_ == 0) throw Error("PipelineRunner::next: no step in flight");
    drain_results(true);
  }
  StepOutput out = std::move(results_.front());
  results_.pop_front();
  return out;
}

void PipelineRunner::stop() {
  if (stopped_ || ch_.size() == 1) {
    stopped_ = true;
    return;
  }
  while (in_flight_ > 0) drain_results(true);
  stopped_ = true;
  ch_.send(1, kTagStop, {});
}

}  // namespace trillion
