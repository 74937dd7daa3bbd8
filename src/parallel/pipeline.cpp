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
    msg = encode_result(head_step(ticket, in, x.data()));
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

std::vector<float> PipelineStage::embed_and_forward(const StepInput& in) {
  const int64_t n = in.batch.size();
  std::vector<float> x(size_t(n * cfg_.hidden_size));
  model_.embed(in.tokens.data(), n, x.data());
  model_.forward(in.batch, x.data(), cache_);
  return x;
}

StepOutput PipelineStage::head_step(uint64_t ticket, const StepInput& in, const float* x) {
  StepOutput out = trillion::head_step(model_, x, in, spec_.get());
  out.ticket = ticket;
  return out;
}

PipelineRunner::PipelineRunner(RmaChannel& ch, const ModelConfig& cfg, TensorSource& source, ThreadPool& pool,
                               const Layout& layout, const RunShape& shape)
    : stage_(ch, cfg, source, pool, layout, shape),
      micro_batches_(shape.micro_batches > 0 ? shape.micro_batches : ch.size()) {
  if (ch.rank() != 0) throw Error("PipelineRunner runs on rank 0");
}

void PipelineRunner::drain_results(bool block) {
  RmaChannel& ch = stage_.channel();
  const ModelConfig& cfg = stage_.config();
  const int last = ch.size() - 1;
  for (;;) {
    std::optional<Message> m;
    auto t0 = clock_type::now();
    if (block) {
      m = ch.recv(last);
    } else {
      m = ch.try_recv(last);
      if (!m) return;
    }
    stage_.add_wait(since(t0));
    if (stage_.range().head_split > 0) {
      if (m->tag != kTagHeadPart)
        throw Error("protocol error: rank 0 expected a head part, got tag " + std::to_string(m->tag));
      auto t1 = clock_type::now();
      results_.push_back(
          finish_head(decode_head_part(m->data, cfg.hidden_size, cfg.vocab_size - stage_.range().head_split)));
      stage_.add_busy(since(t1));
    } else {
      if (m->tag != kTagResult)
        throw Error("protocol error: rank 0 expected a result, got tag " + std::to_string(m->tag));
      results_.push_back(decode_result(m->data, cfg.vocab_size));
    }
    --in_flight_;
    if (block) return;
  }
}

void PipelineRunner::submit(uint64_t ticket, const StepInput& in) {
  if (stopped_) throw Error("PipelineRunner: submit after stop");
  RmaChannel& ch = stage_.channel();
  auto t0 = clock_type::now();
  const std::vector<float> x = stage_.embed_and_forward(in);
  if (ch.size() == 1) {
    results_.push_back(stage_.head_step(ticket, in, x.data()));
    stage_.add_busy(since(t0));
    return;
  }
  const std::vector<std::byte> msg = encode_step(ticket, in, x.data(), stage_.config().hidden_size);
  stage_.add_busy(since(t0));
  if (stage_.range().head_split > 0) pending_.push_back({ticket, in});
  ++in_flight_;
  // Never block on rank 1's ring while results wait for us: the last stage
  // could be blocked on our ring, and rank 1 on its successor (a cycle).
  auto t1 = clock_type::now();
  const double busy_before = stage_.busy(), wait_before = stage_.wait();
  Backoff backoff = ch.backoff();
  while (!ch.try_send(1, kTagStep, msg)) {
    drain_results(false);
    backoff.pause();
  }
  // drain_results counts its own wait and a split head's work: the rest is this wait.
  stage_.add_wait(since(t1) - (stage_.busy() - busy_before) - (stage_.wait() - wait_before));
}

// Rank 0's half of a split head: its lm_head rows of the normed rows the last
// stage sent, the logits assembled in vocabulary order, and the choice. The
// same kernels on the same rows as an unsplit head: the same bits.
StepOutput PipelineRunner::finish_head(HeadPart part) {
  if (pending_.empty() || pending_.front().first != part.ticket)
    throw Error("protocol error: head part for step " + std::to_string(part.ticket) + " out of order");
  const StepInput in = std::move(pending_.front().second);
  pending_.pop_front();
  const int64_t m = part.m, split = stage_.range().head_split, vocab = stage_.config().vocab_size;
  if (m != int64_t(in.logit_rows.size())) throw Error("protocol error: head part rows do not match the step");
  std::vector<float> first(size_t(m * split));
  stage_.head_rows(part.h.data(), m, first.data());
  StepOutput out;
  out.ticket = part.ticket;
  out.logits.resize(size_t(m * vocab));
  for (int64_t i = 0; i < m; ++i) {
    std::memcpy(&out.logits[size_t(i * vocab)], &first[size_t(i * split)], size_t(split) * sizeof(float));
    std::memcpy(&out.logits[size_t(i * vocab + split)], &part.logits[size_t(i * (vocab - split))],
                size_t(vocab - split) * sizeof(float));
  }
  choose_tokens(stage_.config(), in, out);
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
  RmaChannel& ch = stage_.channel();
  if (stopped_ || ch.size() == 1) {
    stopped_ = true;
    return;
  }
  while (in_flight_ > 0) drain_results(true);
  stopped_ = true;
  ch.send(1, kTagStop, {});
}

}  // namespace trillion
