// SchedulerRun: the run loop, building and submitting a group's step, and
// taking its tokens back (admission: scheduler_admit.cpp).
#include "scheduler/scheduler_run.hpp"

#include <algorithm>
#include <span>
#include <utility>

#include "common/error.hpp"

namespace trillion {

SchedulerRun::SchedulerRun(StepRunner& runner, const ModelConfig& cfg, const SchedulerOptions& opts,
                           SchedulerStats& stats, std::vector<int32_t> released,
                           const std::vector<const GenerateRequest*>& requests,
                           const std::function<void(const GenerationResult&)>& done)
    : runner_(runner),
      cfg_(cfg),
      opts_(opts),
      stats_(stats),
      done_(done),
      pending_(requests.begin(), requests.end()),
      M_(std::max(1, std::min<int>(runner.max_in_flight(), runner.slots()))),
      groups_(size_t(M_)),
      max_len_(runner.max_len()),
      kv_(runner.kv_pools()),
      ledger_(kv_, runner.slots()),
      cache_(kv_, ledger_),
      sharing_(opts.prefix_sharing && !opts.speculative && kv_.limited()),  // fakes have no cache
      released_(std::move(released)) {
  for (int32_t s = runner.slots() - 1; s >= 0; --s) groups_[size_t(s % M_)].free_slots.push_back(s);
}

bool SchedulerRun::run() {
  bool stopping = false;
  for (;;) {
    stopping = stopping || (opts_.should_stop && opts_.should_stop());
    // Fill the pipeline: every idle group with work submits a step.
    for (int tried = 0; !stopping && tried < M_ && in_flight_ < M_; ++tried) {
      Group& g = groups_[next_group_];
      const uint64_t ticket = next_group_;
      next_group_ = (next_group_ + 1) % size_t(M_);
      if (g.in_flight) continue;
      admit(g);
      if (!g.active.empty()) submit(g, ticket);
    }
    if (in_flight_ == 0 && stopping) return false;  // the steps in flight have finished
    if (in_flight_ == 0) {  // nothing running and nothing could start: all done
      if (!pending_.empty()) throw Error("scheduler: a request could not be admitted into an empty cache");
      cache_.check_drained("scheduler");
      return true;
    }
    StepOutput out = runner_.next();
    complete(groups_[size_t(out.ticket)], out);
    if (opts_.after_step) opts_.after_step();
  }
}

// Keeps the sequence's blocks written by submitted steps: its full blocks up
// to `cached` (while prefilling, only the prompt's: later positions are yet to
// be written) and, once it has finished, the partial last one.
void SchedulerRun::keep_blocks(Sequence& s, bool finished) {
  const int64_t B = cache_.block_tokens();
  const int64_t upto = finished ? s.cached : std::min<int64_t>(s.cached, int64_t(s.req->prompt_token_ids.size()));
  const auto tokens = std::span<const int32_t>(s.tokens);
  for (; s.keep_from * B < upto; ++s.keep_from) {
    const int64_t n = std::min(B, upto - s.keep_from * B);
    if (n < B && !finished) break;  // a partial block is still being written
    const int32_t parent = s.chain.empty() ? PrefixCache::kNone : s.chain.back();
    const auto kept = cache_.keep(s.slot, parent, int32_t(s.keep_from),
                                  tokens.subspan(size_t(s.keep_from * B), size_t(n)), pending_ops_);
    s.pins.push_back(kept.id);
    if (n == B) s.chain.push_back(kept.id);
  }
}

// The chosen token's position in its sequence is the random stream's counter.
SamplingParams SchedulerRun::params_for(const Sequence& s) const {
  SamplingParams p = s.req->sampling;
  p.position = int64_t(s.tokens.size());
  p.token_limit = opts_.token_limit;
  p.mask_eos = int64_t(s.generated.size()) < s.req->min_tokens;  // EOS not yet allowed
  return p;
}

// Builds and submits the group's next step: one decode row per decoding
// sequence (they always fit; with a draft's row when speculative), then
// prefill chunks up to the token budget.
void SchedulerRun::submit(Group& g, uint64_t ticket) {
  StepInput in;
  in.batch.released = std::exchange(released_, {});
  in.batch.prefix_ops = std::exchange(pending_ops_, {});
  g.wants.clear();
  g.has_prefill = false;
  for (Sequence& s : g.active)
    if (!s.prefilling()) add_decode_rows(g, s, in);
  int64_t budget = std::max<int64_t>(1, opts_.step_tokens);
  for (Sequence& s : g.active)
    if (s.prefilling() && budget > 0) add_prefill_rows(g, s, in, budget);
  g.rows = in.batch.size();
  g.submitted = std::chrono::steady_clock::now();
  if (!stats_.first_submitted) stats_.first_submitted = g.submitted;
  runner_.submit(ticket, in);
  g.in_flight = true;
  ++in_flight_;
  ++stats_.steps;
}

void SchedulerRun::add_decode_rows(Group& g, Sequence& s, StepInput& in) {
  in.tokens.push_back(s.tokens.back());
  in.batch.rows.push_back({s.slot, int32_t(s.cached)});
  in.logit_rows.push_back(in.batch.size() - 1);
  in.sampling.push_back(params_for(s));
  g.wants.push_back(&s);
  ++s.cached;
  ++stats_.decode_tokens;
  if (opts_.speculative) add_draft_row(g, s, in);
}

// Speculative decoding's rows beside a decode row: the decode row's MTP input
// is the token it chooses, and the MTP layer's last draft, when there is room
// for it, rides as a row of its own that yields the token after it (verified
// by the head: runner's step, step_runner.hpp).
void SchedulerRun::add_draft_row(Group& g, Sequence& s, StepInput& in) {
  in.mtp_next.push_back(kChosenNext);
  // Worth running only when the request and the context have room for both.
  const int64_t after = int64_t(s.tokens.size()) + 1;  // tokens once the decode row's is added
  const bool room = int64_t(s.generated.size()) + 2 <= s.req->max_tokens && after + 1 <= max_len_;
  in.drafts.push_back(room ? s.draft : -1);
  if (room && s.draft >= 0) {
    in.tokens.push_back(s.draft);
    in.batch.rows.push_back({s.slot, int32_t(s.cached)});
    in.logit_rows.push_back(in.batch.size() - 1);
    SamplingParams p = params_for(s);
    ++p.position;
    in.sampling.push_back(p);
    in.mtp_next.push_back(kChosenNext);
    in.drafts.push_back(-1);
    g.wants.push_back(&s);
    ++stats_.drafted;
  }
  s.draft = -1;
}

void SchedulerRun::add_prefill_rows(Group& g, Sequence& s, StepInput& in, int64_t& budget) {
  const bool spec = opts_.speculative;
  const int64_t prompt = int64_t(s.req->prompt_token_ids.size());
  const int64_t take = std::min(prompt - s.cached, budget);
  budget -= take;
  g.has_prefill = true;
  for (int64_t p = s.cached; p < s.cached + take; ++p) {
    in.tokens.push_back(s.tokens[size_t(p)]);
    in.batch.rows.push_back({s.slot, int32_t(p)});
    // The MTP layer's input at p is the token at p + 1: the prompt's, or the one the last row chooses.
    if (spec) in.mtp_next.push_back(p + 1 < prompt ? s.tokens[size_t(p + 1)] : kChosenNext);
  }
  s.cached += take;
  stats_.prefill_tokens += take;
  // The prompt's full blocks this chunk completed: kept by the next step
  // (after this one has written them on every rank).
  if (sharing_) keep_blocks(s, false);
  if (s.cached == prompt) {  // the chunk ends the prompt: its last row yields a token
    in.logit_rows.push_back(in.batch.size() - 1);
    in.sampling.push_back(params_for(s));
    if (spec) in.drafts.push_back(-1);
    g.wants.push_back(&s);
  }
}

void SchedulerRun::complete(Group& g, const StepOutput& out) {
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - g.submitted).count();
  (g.has_prefill ? stats_.prefill_seconds : stats_.decode_seconds) += secs;
  if (!first_done_) {
    first_done_ = true;
    stats_.first_step_seconds = secs;
    stats_.first_step_rows = g.rows;
  }
  g.in_flight = false;
  --in_flight_;
  for (size_t i = 0; i < g.wants.size(); ++i) {
    Sequence& s = *g.wants[i];
    if (!s.req) continue;  // finished at its first row of this step (the draft's row is then moot)
    const int32_t tok = out.tokens[i];
    if (tok == kNotProduced) continue;  // a rejected draft's row
    if (opts_.speculative) {
      if (i > 0 && g.wants[i - 1] == &s) ++stats_.accepted;  // the draft's row produced: its draft stood
      // cached: the positions whose KV stands (a rejected draft's is rewritten next).
      s.cached = int64_t(s.tokens.size());
      s.draft = i < out.drafts.size() ? out.drafts[i] : -1;
    }
    take_token(g, s, tok, i, out);
  }
  g.wants.clear();
  g.active.erase(std::remove_if(g.active.begin(), g.active.end(), [](const Sequence& s) { return s.req == nullptr; }),
                 g.active.end());
}

// Appends the token (row `row` of the step's output) and finishes the
// sequence when it stops, reaches its length or its context is full.
void SchedulerRun::take_token(Group& g, Sequence& s, int32_t tok, size_t row, const StepOutput& out) {
  s.generated.push_back(tok);
  s.tokens.push_back(tok);
  if (s.req->sampling.logprobs || s.req->sampling.top_logprobs > 0) {
    s.logprobs.push_back(row < out.logprobs.size() ? out.logprobs[row] : 0.0f);
    s.top_logprobs.push_back(row < out.top_logprobs.size() ? out.top_logprobs[row] : std::vector<TokenLogprob>{});
  }
  const char* reason = nullptr;
  std::string error;
  const bool may_stop = int64_t(s.generated.size()) >= s.req->min_tokens;
  if (tok < 0) {
    error = "the model's logits were not finite at position " + std::to_string(s.tokens.size() - 1);
  } else if (s.stop) {
    // A failure in one request's text (its detokenizer or stop matcher) ends that request only.
    try {
      if (!may_stop) s.stop->pass(s.stream->push(tok));
      else if (s.stop->push(s.stream->push(tok))) reason = "stop";  // the stop string is cut from the text
    } catch (const std::exception& e) {
      error = std::string("stop strings: ") + e.what();
    }
  }
  if (!reason && error.empty()) {
    if (may_stop && !s.req->ignore_eos &&
        std::find(cfg_.eos_token_ids.begin(), cfg_.eos_token_ids.end(), tok) != cfg_.eos_token_ids.end())
      reason = "stop";
    else if (int64_t(s.generated.size()) >= s.req->max_tokens)
      reason = "length";
    else if (int64_t(s.tokens.size()) >= max_len_)
      reason = "length";  // the context is full
  }
  if (reason || !error.empty()) finish(g, s, reason, error);
}

// Reports the sequence's result and frees its slot (released to the cache by
// the next step), keeping what it computed for later requests.
void SchedulerRun::finish(Group& g, Sequence& s, const char* reason, const std::string& error) {
  GenerationResult res{s.req, s.generated, s.logprobs, s.top_logprobs, reason ? reason : "", std::nullopt, error};
  if (s.stop && error.empty()) {
    try {
      // An unfinished character at the end may still complete a stop string's bytes.
      if (!s.stop->stopped() && s.stop->push(s.stream->flush())) res.finish_reason = "stop";
      s.stop->finish();
      res.text = s.stop->text();
    } catch (const std::exception& e) {
      res.error = std::string("stop strings: ") + e.what();
    }
  }
  done_(res);
  g.free_slots.push_back(s.slot);
  if (sharing_) keep_blocks(s, true);  // what it computed, generated tokens too, for later requests
  cache_.unpin(s.pins);
  ledger_.release(s.slot);
  released_.push_back(s.slot);
  s.req = nullptr;
}

}  // namespace trillion
