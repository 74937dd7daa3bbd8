// One Scheduler::run (scheduler.hpp says what it does): its state and its
// steps as a class of its own, internal to the scheduler. A run admits
// requests into free slots (admit), builds and submits each group's next step
// (submit), and takes each step's tokens back (complete), until every request
// has finished or a stop is asked for.
#pragma once
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/prefix_cache.hpp"
#include "scheduler/scheduler.hpp"

namespace trillion {

class SchedulerRun {
 public:
  // `stats` is the Scheduler's (a run adds to it); `released` the slots the
  // warm-up step used, released by the first step.
  SchedulerRun(StepRunner& runner, const ModelConfig& cfg, const SchedulerOptions& opts, SchedulerStats& stats,
               std::vector<int32_t> released, const std::vector<const GenerateRequest*>& requests,
               const std::function<void(const GenerationResult&)>& done);
  // Scheduler::run's contract: false if should_stop ended the run early.
  bool run();

 private:
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
    int32_t draft = -1;          // speculative: the MTP layer's draft of the token after tokens.back()
    std::vector<int32_t> chain;  // its first blocks' kept ids: shared, then kept by it
    std::vector<int32_t> pins;   // the kept blocks it pins (shared, copied from, kept by it)
    int64_t keep_from = 0;       // its next block to keep
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

  // Admission (scheduler_admit.cpp).
  void admit(Group& g);
  // Places r in one of g's free slots, or returns false: it waits for
  // running sequences (to finish, or to keep a prefix it shares).
  bool place(Group& g, const GenerateRequest* r);
  bool waits_for_prefill(const Group& g, const GenerateRequest& r,
                         const std::function<int64_t(int32_t)>& start_in) const;

  // Steps (scheduler_run.cpp).
  void keep_blocks(Sequence& s, bool finished);
  SamplingParams params_for(const Sequence& s) const;
  void submit(Group& g, uint64_t ticket);
  void add_decode_rows(Group& g, Sequence& s, StepInput& in);
  void add_draft_row(Group& g, Sequence& s, StepInput& in);
  void add_prefill_rows(Group& g, Sequence& s, StepInput& in, int64_t& budget);
  void complete(Group& g, const StepOutput& out);
  void take_token(Group& g, Sequence& s, int32_t tok, size_t row, const StepOutput& out);
  void finish(Group& g, Sequence& s, const char* reason, const std::string& error);

  StepRunner& runner_;
  const ModelConfig& cfg_;
  const SchedulerOptions& opts_;
  SchedulerStats& stats_;
  const std::function<void(const GenerationResult&)>& done_;
  std::deque<const GenerateRequest*> pending_;
  const int M_;  // groups: the steps the runner keeps in flight
  std::vector<Group> groups_;
  const int64_t max_len_;
  const KvPools kv_;
  KvLedger ledger_;    // blocks reserved by running sequences
  PrefixCache cache_;  // kept blocks of prompts
  const bool sharing_;
  std::vector<KvPrefixOp> pending_ops_;  // for the next submitted step
  std::vector<int32_t> released_;        // slots finished since the last submitted step
  int in_flight_ = 0;
  size_t next_group_ = 0;
  bool first_done_ = false;
};

}  // namespace trillion
