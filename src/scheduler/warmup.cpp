// Scheduler::warm_up: one throwaway prefill step before a run (why: see
// scheduler.hpp). As llama.cpp's warm-up eval (which routes to every expert
// of a MoE model) and vLLM's start-up profile step, it is on by default and
// kept out of the run's timing; `--no-warmup` skips it.
#include <algorithm>
#include <chrono>

#include "scheduler/scheduler.hpp"

namespace trillion {

void Scheduler::warm_up(int64_t rows) {
  const KvPools kv = runner_.kv_pools();
  // One slot per KV pool (expert parallel: one per rank), so every rank's
  // attention runs; each takes an equal share of the rows from position 0.
  const int32_t slots = std::max(1, std::min(kv.pools(), runner_.slots()));
  int64_t per_slot = std::min<int64_t>(rows / slots, runner_.max_len());
  if (kv.limited()) per_slot = std::min<int64_t>(per_slot, kv.pool_positions());
  if (per_slot <= 0) return;
  StepInput in;
  // A fixed pseudo-random walk over the vocabulary (an LCG: no state shared
  // with anything else), so the rows route like text rather than one token.
  const int64_t vocab = std::max<int64_t>(1, runner_.vocab_size());
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (int32_t slot = 0; slot < slots; ++slot) {
    for (int64_t p = 0; p < per_slot; ++p) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      in.tokens.push_back(int32_t((state >> 33) % uint64_t(vocab)));
      in.batch.rows.push_back({slot, int32_t(p)});
      // The MTP layer reads the next position's token; each slot's last row
      // is a logit row whose next token is the one it chooses.
      if (opts_.speculative) in.mtp_next.push_back(kChosenNext);
    }
    in.logit_rows.push_back(in.batch.size() - 1);  // the head runs too
    if (opts_.speculative) in.drafts.push_back(-1);
  }
  if (opts_.speculative)  // within a slot, row r's next token is row r + 1's
    for (size_t r = 0; r + 1 < in.tokens.size(); ++r)
      if (in.batch.rows[r + 1].slot == in.batch.rows[r].slot) in.mtp_next[r] = in.tokens[r + 1];
  const auto t0 = std::chrono::steady_clock::now();
  stats_.first_submitted = t0;
  runner_.step(in);
  stats_.warmup_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stats_.warmup_rows = in.batch.size();
  for (int32_t slot = 0; slot < slots; ++slot) warmup_slots_.push_back(slot);
}

}  // namespace trillion
