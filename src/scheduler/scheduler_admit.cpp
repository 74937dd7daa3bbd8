// SchedulerRun's admission: which pending request takes which free slot, with
// the KV-cache blocks it reserves and the kept prefix blocks it reads
// (scheduler.hpp states the rules).
#include <algorithm>
#include <optional>

#include "scheduler/kv_admission.hpp"
#include "scheduler/scheduler_run.hpp"

namespace trillion {

// Whether a sequence prefilling in a pool where `g` has a free slot has whole
// blocks in common with r's prompt beyond what `start_in(slot)` already reads
// there.
bool SchedulerRun::waits_for_prefill(const Group& g, const GenerateRequest& r,
                                     const std::function<int64_t(int32_t)>& start_in) const {
  const int64_t B = cache_.block_tokens();
  const auto& want = r.prompt_token_ids;
  if (want.size() < 2) return false;
  for (const Group& other : groups_)
    for (const Sequence& a : other.active) {
      if (!a.prefilling()) continue;
      const auto free = std::find_if(g.free_slots.begin(), g.free_slots.end(),
                                     [&](int32_t s) { return kv_.pool_of(s) == kv_.pool_of(a.slot); });
      if (free == g.free_slots.end()) continue;
      const auto& have = a.req->prompt_token_ids;
      const size_t n = std::min(have.size(), want.size() - 1);  // its last prompt position is always computed
      const int64_t common =
          std::mismatch(have.begin(), have.begin() + std::ptrdiff_t(n), want.begin()).first - have.begin();
      if (common / B * B > start_in(*free)) return true;
    }
  return false;
}

void SchedulerRun::admit(Group& g) {
  while (!pending_.empty() && !g.free_slots.empty()) {
    const GenerateRequest* r = pending_.front();
    if (r->max_tokens == 0) {  // nothing to generate: no forward pass needed
      pending_.pop_front();
      done_(GenerationResult{r, {}, {}, {}, "length", std::nullopt, {}});
      continue;
    }
    const int64_t positions = kv_positions(*r, max_len_);
    // Both are caught before the run (kv_admission.hpp, request_checks.cpp); should one slip
    // through, it fails this request, not the job.
    if (!kv_.fits_empty(positions) || (!r->stop.empty() && !opts_.text_stream)) {
      pending_.pop_front();
      GenerationResult res{r, {}, {}, {}, "", std::nullopt, {}};
      res.error = !kv_.fits_empty(positions) ? "needs more KV-cache blocks than a pool holds"
                                             : "has stop strings but the model has no tokenizer";
      done_(res);
      continue;
    }
    if (!place(g, r)) break;
    pending_.pop_front();
  }
}

// The free slot (latest freed first) whose pool shares the most of the prompt
// and has room for the rest; failing that, evicting unpinned kept blocks, the
// first whose pool can make room.
bool SchedulerRun::place(Group& g, const GenerateRequest* r) {
  const int64_t need = kv_.blocks_for(kv_positions(*r, max_len_));
  const int64_t prompt = int64_t(r->prompt_token_ids.size());
  std::vector<std::optional<PrefixCache::Plan>> plans(size_t(kv_.pools()));
  auto plan_of = [&](int32_t slot) -> const PrefixCache::Plan& {
    auto& p = plans[size_t(kv_.pool_of(slot))];
    if (!p) {  // the last prompt position is always computed: its logits give the first token
      const auto m = sharing_ ? cache_.match(kv_.pool_of(slot), r->prompt_token_ids) : PrefixCache::Match{};
      p = cache_.plan(m, std::min(m.tokens(cache_.block_tokens()), prompt - 1));
    }
    return *p;
  };
  auto room = [&](int32_t slot) {
    return ledger_.can_reserve_blocks(slot, std::max<int64_t>(0, need - int64_t(plan_of(slot).share.size())));
  };
  // A sequence still prefilling a prompt that starts like this one will keep
  // those blocks within a step or a few: wait for them rather than compute the
  // same positions twice (requests that arrive together, as an evaluation's
  // few-shot prompts do, would otherwise all compute their common prefix). It
  // always progresses, so this wait ends.
  if (sharing_ && waits_for_prefill(g, *r, [&](int32_t slot) { return plan_of(slot).start; })) return false;
  auto chosen = g.free_slots.rend();
  for (auto it = g.free_slots.rbegin(); it != g.free_slots.rend(); ++it)
    if (room(*it) && (chosen == g.free_slots.rend() || plan_of(*it).start > plan_of(*chosen).start)) chosen = it;
  for (auto it = g.free_slots.rbegin(); chosen == g.free_slots.rend() && it != g.free_slots.rend(); ++it) {
    const auto pins = plan_of(*it).pins;
    cache_.pin(pins);  // not evicted to make room for the request that reads them
    while (!room(*it) && cache_.evict(kv_.pool_of(*it), pending_ops_) != PrefixCache::kNone) {}
    cache_.unpin(pins);
    if (!room(*it) && !pins.empty()) {
      // What it would read, pinned, leaves too little room (a pool about one
      // sequence large): it computes its prompt in full instead.
      plans[size_t(kv_.pool_of(*it))] = PrefixCache::Plan{};
      while (!room(*it) && cache_.evict(kv_.pool_of(*it), pending_ops_) != PrefixCache::kNone) {}
    }
    if (room(*it)) chosen = it;
  }
  if (chosen == g.free_slots.rend()) return false;  // wait for running sequences to finish
  std::swap(*chosen, g.free_slots.back());
  const int32_t slot = g.free_slots.back();
  const PrefixCache::Plan plan = plan_of(slot);
  ledger_.reserve_blocks(slot, std::max<int64_t>(0, need - int64_t(plan.share.size())));
  cache_.pin(plan.pins);
  PrefixCache::plan_ops(slot, plan, pending_ops_);
  Sequence s;
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
  s.slot = slot;
  g.free_slots.pop_back();
  g.active.push_back(std::move(s));
  return true;
}

}  // namespace trillion
