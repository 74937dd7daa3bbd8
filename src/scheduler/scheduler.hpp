// The scheduler of `generate`: continuous batching over the runner's sequence slots.
// Slots are split into as many micro-batch groups as the runner keeps steps
// in flight (pipeline stages); each group's step carries one decode row per
// running sequence plus prefill chunks of newly admitted prompts (up to a
// token budget). A finished sequence frees its slot at once and the next
// request takes it. The token chosen for a row depends only on that row's
// logits and its request's sampling params (seed, position), so results do not
// depend on slots, groups or budgets.
//
// KV-cache blocks: a request is admitted only when its slot's pool has the
// blocks for its prompt + max_tokens (capped at the context) free, reserved
// until it finishes; so a running sequence never finds the pool dry and
// nothing waits on anything but finishing sequences. Admission is in request
// order: a request that must wait holds back those behind it. A finished
// sequence's slot is released in the next step, which every rank's cache
// applies before that step's rows take blocks. With shared prefixes a request
// reserves only the blocks it does not share, and kept blocks are evicted
// (least recently used) when a request needs their room.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "config/model_config.hpp"
#include "parallel/step_runner.hpp"
#include "requests/results.hpp"
#include "scheduler/stop_strings.hpp"
#include "text/text_codec.hpp"

namespace trillion {

struct SchedulerOptions {
  int64_t step_tokens = 256;  // prefill rows per step (decode rows always fit)
  TextCodec::StreamFactory text_stream;  // detokenizer for stop strings; requests with `stop` need it
  int32_t token_limit = 0;  // the tokenizer's size: larger ids are never chosen (0: no tokenizer, no limit)
  std::function<void()> after_step;  // called as each step's results are taken (progress, metrics)
  // Polled before each round of submissions: once true, nothing new is
  // submitted, the steps in flight finish (their finished requests are
  // reported) and run() returns false. A graceful stop (SIGTERM) or a failed
  // output ends a run within one step this way.
  std::function<bool()> should_stop;
  // --speculative mtp: each decoding sequence's step carries its new token
  // and the MTP layer's draft of the next (verified by the head, exact for
  // greedy and sampling); the runner must have been made speculative.
  bool speculative = false;
  // Shared prefixes (prefix_cache.hpp): a prompt's full blocks that another
  // request kept are read, not computed again. Off with speculative (the MTP
  // layer's cache at a block's last position depends on the token after it).
  bool prefix_sharing = true;
};

struct SchedulerStats {
  int64_t steps = 0;
  int64_t prefill_tokens = 0;   // prompt positions computed
  int64_t prefill_reused = 0;   // prompt positions read from shared prefixes instead
  int64_t decode_tokens = 0;
  double prefill_seconds = 0;  // submit-to-result time of steps that carried prefill rows
  double decode_seconds = 0;   // submit-to-result time of decode-only steps
  // The run's first step (counted in the above too), apart: without a
  // warm-up step (warm_up) it pays the run's first touches of weights and
  // buffers, and a study tells that from the steady rate; with one, it shows
  // what remains.
  double first_step_seconds = 0;
  int64_t first_step_rows = 0;
  // When the first step (the warm-up's, with one) was submitted: the end of
  // start-up (empty before).
  std::optional<std::chrono::steady_clock::time_point> first_submitted;
  double warmup_seconds = 0;  // warm_up()'s step, not counted in steps or the above
  int64_t warmup_rows = 0;
  int64_t drafted = 0;   // speculative: drafts verified
  int64_t accepted = 0;  // of them, accepted (each one a token without a step of its own)
};

class Scheduler {
 public:
  Scheduler(StepRunner& runner, const ModelConfig& cfg, SchedulerOptions opts = {});
  // Runs every request; `done` is called as each finishes, in completion
  // order. Returns false if should_stop ended the run early.
  bool run(const std::vector<const GenerateRequest*>& requests,
           const std::function<void(const GenerationResult&)>& done);
  const SchedulerStats& stats() const { return stats_; }

  // One throwaway prefill step of up to `rows` rows of pseudo-random tokens,
  // before run() (warmup.cpp): it reads the weights the way steps do, so the
  // first real step does not pay for first touches (without it a short first
  // prefill took two to three times as long as the same prefill later). With
  // `rows` well past experts / top_k it routes to every expert. Its slots are
  // released by run()'s first step; its outputs are discarded, and no row of
  // a request depends on it (each row reads only its own sequence's cache).
  void warm_up(int64_t rows);

 private:
  StepRunner& runner_;
  const ModelConfig& cfg_;
  SchedulerOptions opts_;
  SchedulerStats stats_;
  std::vector<int32_t> warmup_slots_;  // released by run()'s first step
};

}  // namespace trillion
