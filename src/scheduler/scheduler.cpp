#include "scheduler/scheduler.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <optional>
#include <span>
#include <utility>

#include "common/error.hpp"
#include "scheduler/kv_admission.hpp"
#include "scheduler/prefix_cache.hpp"

namespace trillion {

namespace {

struct Sequence {
  const GenerateRequest* req = nullptr;
  int32_t slot = 0;
  std::vector<int32_t> tokens;  // prompt then generated
  int64_t cached = 0;           // positions submitted to the runner (cached once the step runs)
  std::vector<int32_t> generated;
  std::vector<float> logprobs;
  std::vector<std::vector<TokenLogprob>> top_logprobs;
  std::unique_ptr<TokenTextStream> stream;  // with stop strings only
  std::unique_ptr<StopMatcher> stop;
  int32_t draft = -1;           // speculative: the MTP layer's draft of the token after tokens.back()
  std::vector<int32_t> chain;   // its first blocks' kept ids: shared, then kept by it
  std::vector<int32_t> pins;    // the kept blocks it pins (shared, copied from, kept by it)
  int64_t keep_from = 0;        // its next block to keep
  bool prefilling() const { return cached < int64_t(req->prompt_token_ids.size()); }
};

// A micro-batch group: the sequences whose slots are congruent to it modulo
// the runner's in-flight count; at most one of its steps is in flight.
struct Group {
  std::vector<Sequence> active;
  std::vector<int32_t> free_slots;
  bool in_flight = false;
  std::vector<Sequence*> wants;  // sequences whose next token the in-flight step yields
  std::chrono::steady_clock::time_point submitted;
  bool has_prefill = false;
  int64_t rows = 0;  // of the in-flight step
};

}  // namespace

Scheduler::Scheduler(StepRunner& runner, const ModelConfig& cfg, SchedulerOptions opts)
    : runner_(runner), cfg_(cfg), opts_(opts) {}

bool Scheduler::run(const std::vector<const GenerateRequest*>& requests,
                    const std::function<void(const GenerationResult&)>& done) {
  std::deque<const GenerateRequest*> pending(requests.begin(), requests.end());
  const int M = std::max(1, std::min<int>(runner_.max_in_flight(), runner_.slots()));
  std::vector<Group> groups(static_cast<size_t>(M));
  for (int32_t s = runner_.slots() - 1; s >= 0; --s) groups[size_t(s % M)].free_slots.push_back(s);
  const int64_t max_len = runner_.max_len();
  const KvPools kv = runner_.kv_pools();
  KvLedger ledger(kv, runner_.slots());  // blocks reserved by running sequences
  PrefixCache cache(kv, ledger);         // kept blocks of prompts
  const bool sharing = opts_.prefix_sharing && !opts_.speculative && kv.limited();  // fakes have no cache
  std::vector<KvPrefixOp> pending_ops;   // for the next submitted step
  std::vector<int32_t> released = std::exchange(warmup_slots_, {});  // slots finished since the last submitted step
  int in_flight = 0;
  size_t next_group = 0;

  // Whether a sequence prefilling in a pool where `g` has a free slot has
  // whole blocks in common with r's prompt beyond what `start_in(slot)`
  // already reads there.
  auto waits_for_prefill = [&](const Group& g, const GenerateRequest& r, const auto& start_in) {
    const int64_t B = cache.block_tokens();
    const auto& want = r.prompt_token_ids;
    if (want.size() < 2) return false;
    for (const Group& other : groups)
      for (const Sequence& a : other.active) {
        if (!a.prefilling()) continue;
        const auto free = std::find_if(g.free_slots.begin(), g.free_slots.end(),
                                       [&](int32_t s) { return kv.pool_of(s) == kv.pool_of(a.slot); });
        if (free == g.free_slots.end()) continue;
        const auto& have = a.req->prompt_token_ids;
        const size_t n = std::min(have.size(), want.size() - 1);  // its last prompt position is always computed
        const int64_t common = std::mismatch(have.begin(), have.begin() + std::ptrdiff_t(n), want.begin()).first -
                               have.begin();
        if (common / B * B > start_in(*free)) return true;
      }
    return false;
  };

  auto admit = [&](Group& g) {
    while (!pending.empty() && !g.free_slots.empty()) {
      const GenerateRequest* r = pending.front();
      if (r->max_tokens == 0) {  // nothing to generate: no forward pass needed
        pending.pop_front();
        done(GenerationResult{r, {}, {}, {}, "length", std::nullopt, {}});
        continue;
      }
      // A free slot (latest freed first) whose pool has the request's blocks.
      const int64_t positions = kv_positions(*r, max_len);
      // Both are caught before the run (kv_admission.hpp, request_checks.cpp); should one slip
      // through, it fails this request, not the job.
      if (!kv.fits_empty(positions) || (!r->stop.empty() && !opts_.text_stream)) {
        pending.pop_front();
        GenerationResult res{r, {}, {}, {}, "", std::nullopt, {}};
        res.error = !kv.fits_empty(positions) ? "needs more KV-cache blocks than a pool holds"
                                               : "has stop strings but the model has no tokenizer";
        done(res);
        continue;
      }
      // The free slot (latest freed first) whose pool shares the most of the
      // prompt and has room for the rest; failing that, evicting unpinned
      // kept blocks, the first whose pool can make room.
      const int64_t need = kv.blocks_for(positions);
      const int64_t prompt = int64_t(r->prompt_token_ids.size());
      std::vector<std::optional<PrefixCache::Plan>> plans(size_t(kv.pools()));
      auto plan_of = [&](int32_t slot) -> const PrefixCache::Plan& {
        auto& p = plans[size_t(kv.pool_of(slot))];
        if (!p) {  // the last prompt position is always computed: its logits give the first token
          const auto m = sharing ? cache.match(kv.pool_of(slot), r->prompt_token_ids) : PrefixCache::Match{};
          p = cache.plan(m, std::min(m.tokens(cache.block_tokens()), prompt - 1));
        }
        return *p;
      };
      auto room = [&](int32_t slot) {
        return ledger.can_reserve_blocks(slot, std::max<int64_t>(0, need - int64_t(plan_of(slot).share.size())));
      };
      // A sequence still prefilling a prompt that starts like this one will
      // keep those blocks within a step or a few: wait for them rather than
      // compute the same positions twice (requests that arrive together,
      // as an evaluation's few-shot prompts do, would otherwise all compute
      // their common prefix). It always progresses, so this wait ends.
      if (sharing && waits_for_prefill(g, *r, [&](int32_t slot) { return plan_of(slot).start; })) break;
      auto chosen = g.free_slots.rend();
      for (auto it = g.free_slots.rbegin(); it != g.free_slots.rend(); ++it)
        if (room(*it) && (chosen == g.free_slots.rend() || plan_of(*it).start > plan_of(*chosen).start)) chosen = it;
      for (auto it = g.free_slots.rbegin(); chosen == g.free_slots.rend() && it != g.free_slots.rend(); ++it) {
        const auto pins = plan_of(*it).pins;
        cache.pin(pins);  // not evicted to make room for the request that reads them
        while (!room(*it) && cache.evict(kv.pool_of(*it), pending_ops) != PrefixCache::kNone) {}
        cache.unpin(pins);
        if (!room(*it) && !pins.empty()) {
          // What it would read, pinned, leaves too little room (a pool about
          // one sequence large): it computes its prompt in full instead.
          plans[size_t(kv.pool_of(*it))] = PrefixCache::Plan{};
          while (!room(*it) && cache.evict(kv.pool_of(*it), pending_ops) != PrefixCache::kNone) {}
        }
        if (room(*it)) chosen = it;
      }
      if (chosen == g.free_slots.rend()) break;  // wait for running sequences to finish
      std::swap(*chosen, g.free_slots.back());
      pending.pop_front();
      Sequence s;
      const PrefixCache::Plan plan = plan_of(g.free_slots.back());
      ledger.reserve_blocks(g.free_slots.back(), std::max<int64_t>(0, need - int64_t(plan.share.size())));
      cache.pin(plan.pins);
      PrefixCache::plan_ops(g.free_slots.back(), plan, pending_ops);
      s.chain = plan.share;
      s.pins = plan.pins;
      s.keep_from = int64_t(plan.share.size());
      s.cached = plan.start;
      stats_.prefill_reused += plan.start;
      s.req = r;
      s.tokens = r->prompt_token_ids;
      if (!r->stop.empty()) {
        s.stream = opts_.text_stream();
        s.stop = std::make_unique<StopMatcher>(r->stop);
      }
      s.slot = g.free_slots.back();
      g.free_slots.pop_back();
      g.active.push_back(std::move(s));
    }
  };

  // Keeps the sequence's blocks written by submitted steps: its full blocks
  // up to `cached` (while prefilling, only the prompt's: later positions are
  // yet to be written) and, once it has finished, the partial last one.
  auto keep_blocks = [&](Sequence& s, bool finished) {
    const int64_t B = cache.block_tokens();
    const int64_t upto = finished ? s.cached : std::min<int64_t>(s.cached, int64_t(s.req->prompt_token_ids.size()));
    const auto tokens = std::span<const int32_t>(s.tokens);
    for (; s.keep_from * B < upto; ++s.keep_from) {
      const int64_t n = std::min(B, upto - s.keep_from * B);
      if (n < B && !finished) break;  // a partial block is still being written
      const int32_t parent = s.chain.empty() ? PrefixCache::kNone : s.chain.back();
      const auto kept = cache.keep(s.slot, parent, int32_t(s.keep_from), tokens.subspan(size_t(s.keep_from * B), size_t(n)),
                                   pending_ops);
      s.pins.push_back(kept.id);
      if (n == B) s.chain.push_back(kept.id);
    }
  };

  // The chosen token's position in its sequence is the random stream's counter.
  auto params_for = [this](const Sequence& s) {
    SamplingParams p = s.req->sampling;
    p.position = int64_t(s.tokens.size());
    p.token_limit = opts_.token_limit;
    p.mask_eos = int64_t(s.generated.size()) < s.req->min_tokens;  // EOS not yet allowed
    return p;
  };

  // Builds and submits the group's next step: one decode row per decoding
  // sequence (they always fit), then prefill chunks up to the token budget.
  auto submit = [&](Group& g, uint64_t ticket) {
    StepInput in;
    in.batch.released = std::move(released);
    released.clear();
    in.batch.prefix_ops = std::move(pending_ops);
    pending_ops.clear();
    g.wants.clear();
    g.has_prefill = false;
    const bool spec = opts_.speculative;
    for (Sequence& s : g.active) {
      if (s.prefilling()) continue;
      in.tokens.push_back(s.tokens.back());
      in.batch.rows.push_back({s.slot, int32_t(s.cached)});
      in.logit_rows.push_back(in.batch.size() - 1);
      in.sampling.push_back(params_for(s));
      g.wants.push_back(&s);
      ++s.cached;
      ++stats_.decode_tokens;
      if (!spec) continue;
      in.mtp_next.push_back(kChosenNext);
      // The draft's row yields the token after it: worth running only when
      // the request and the context have room for both.
      const int64_t after = int64_t(s.tokens.size()) + 1;  // tokens once this row's is added
      const bool room = int64_t(s.generated.size()) + 2 <= s.req->max_tokens && after + 1 <= max_len;
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
    int64_t budget = std::max<int64_t>(1, opts_.step_tokens);
    for (Sequence& s : g.active) {
      if (!s.prefilling() || budget <= 0) continue;
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
      if (sharing) keep_blocks(s, false);
      if (s.cached == prompt) {  // the chunk ends the prompt: its last row yields a token
        in.logit_rows.push_back(in.batch.size() - 1);
        in.sampling.push_back(params_for(s));
        if (spec) in.drafts.push_back(-1);
        g.wants.push_back(&s);
      }
    }
    g.rows = in.batch.size();
    g.submitted = std::chrono::steady_clock::now();
    if (!stats_.first_submitted) stats_.first_submitted = g.submitted;
    runner_.submit(ticket, in);
    g.in_flight = true;
    ++in_flight;
    ++stats_.steps;
  };

  bool first_done = false;
  auto complete = [&](Group& g, const StepOutput& out) {
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - g.submitted).count();
    (g.has_prefill ? stats_.prefill_seconds : stats_.decode_seconds) += secs;
    if (!first_done) {
      first_done = true;
      stats_.first_step_seconds = secs;
      stats_.first_step_rows = g.rows;
    }
    g.in_flight = false;
    --in_flight;
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
      s.generated.push_back(tok);
      s.tokens.push_back(tok);
      if (s.req->sampling.logprobs || s.req->sampling.top_logprobs > 0) {
        s.logprobs.push_back(i < out.logprobs.size() ? out.logprobs[i] : 0.0f);
        s.top_logprobs.push_back(i < out.top_logprobs.size() ? out.top_logprobs[i] : std::vector<TokenLogprob>{});
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
        else if (int64_t(s.tokens.size()) >= max_len)
          reason = "length";  // the context is full
      }
      if (reason || !error.empty()) {
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
        done(res);
        g.free_slots.push_back(s.slot);
        if (sharing) keep_blocks(s, true);  // what it computed, generated tokens too, for later requests
        cache.unpin(s.pins);
        ledger.release(s.slot);
        released.push_back(s.slot);
        s.req = nullptr;
      }
    }
    g.wants.clear();
    g.active.erase(std::remove_if(g.active.begin(), g.active.end(),
                                  [](const Sequence& s) { return s.req == nullptr; }),
                   g.active.end());
  };

  bool stopping = false;
  for (;;) {
    stopping = stopping || (opts_.should_stop && opts_.should_stop());
    // Fill the pipeline: every idle group with work submits a step.
    for (int tried = 0; !stopping && tried < M && in_flight < M; ++tried) {
      Group& g = groups[next_group];
      const uint64_t ticket = next_group;
      next_group = (next_group + 1) % size_t(M);
      if (g.in_flight) continue;
      admit(g);
      if (!g.active.empty()) submit(g, ticket);
    }
    if (in_flight == 0 && stopping) return false;  // the steps in flight have finished
    if (in_flight == 0) {  // nothing running and nothing could start: all done
      if (!pending.empty()) throw Error("scheduler: a request could not be admitted into an empty cache");
      cache.check_drained("scheduler");
      break;
    }
    StepOutput out = runner_.next();
    complete(groups[size_t(out.ticket)], out);
    if (opts_.after_step) opts_.after_step();
  }
  return true;
}

}  // namespace trillion
