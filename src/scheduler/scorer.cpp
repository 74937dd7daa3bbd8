#include "scheduler/scorer.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <memory>
#include <unordered_map>

#include "common/error.hpp"
#include "common/npy.hpp"
#include "scheduler/prefix_cache.hpp"

namespace trillion {

double token_logprob(const float* logits, int64_t vocab, int32_t target) {
  double mx = logits[0];
  for (int64_t i = 1; i < vocab; ++i) mx = std::max(mx, double(logits[i]));
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(double(logits[i]) - mx);
  return double(logits[target]) - mx - std::log(sum);
}

bool is_safe_file_id(const std::string& id) {
  if (id.empty() || id[0] == '.' || id.size() > 200) return false;
  for (char c : id)
    if (c == '/' || c == '\\' || c == '\0') return false;
  return true;
}

Scorer::Scorer(StepRunner& runner, ScorerOptions opts) : runner_(runner), opts_(std::move(opts)) {}

namespace {

struct Job {  // one request being scored
  ScoreResult result;
  std::unique_ptr<NpyRowWriter> npy;
  int64_t chunks_left = 0;
  PrefixCache::Plan plan;            // what it reads from kept blocks: positions [0, plan.start)
  std::vector<int32_t> chain;        // its first blocks' kept ids: shared, then kept by it
  std::vector<int32_t> pins;         // the kept blocks it pins
  std::vector<std::pair<int64_t, int32_t>> fresh;  // (block, id) it kept first: their rows go to the cache
};

// A kept block's results, from the request that computed it: each position's
// greedy id, and the log-prob of each position's token given those before
// it (so every entry a request reads gives the targets inside it: the
// target after a block's last position is the next block's first token,
// which differs between the requests that share the block).
struct BlockRows {
  std::vector<int32_t> greedy;
  std::vector<double> logprob_in;
};

struct Chunk {  // one submitted step: rows [begin, begin + n) of a job
  size_t job;
  int64_t begin, n;
};

}  // namespace

bool Scorer::run(const std::vector<const ScoreRequest*>& requests,
                 const std::function<void(const ScoreResult&)>& done) {
  const int64_t vocab = runner_.vocab_size();
  const int64_t chunk = std::max<int64_t>(1, opts_.step_tokens);
  const int M = std::max(1, runner_.max_in_flight());
  std::vector<Job> jobs(requests.size());
  std::deque<Chunk> in_flight;
  size_t next_done = 0;  // results are reported in request order

  const KvPools kv = runner_.kv_pools();
  KvLedger ledger(kv, runner_.slots());
  PrefixCache cache(kv, ledger);
  const bool sharing = opts_.prefix_sharing && kv.limited() && opts_.logits_dir.empty();
  const int64_t B = cache.block_tokens();
  std::vector<KvPrefixOp> pending_ops;  // for the next submitted step
  std::unordered_map<int32_t, BlockRows> kept_rows;  // by kept id, once its request is reported

  // The rows a request read from the cache, from the requests that computed
  // them; then the rows of the blocks it kept first, for later requests.
  auto fill_shared = [&](Job& j) {
    const PrefixCache::Plan& plan = j.plan;
    auto rows_at = [&](int64_t q) -> const BlockRows& {  // the kept block holding position q <= start
      const size_t b = size_t(q / B);
      return kept_rows.at(b < plan.share.size() ? plan.share[b] : plan.source);
    };
    for (int64_t p = 0; p < plan.start; ++p) {
      j.result.greedy_ids[size_t(p)] = rows_at(p).greedy[size_t(p % B)];
      if (j.result.greedy_ids[size_t(p)] < 0 && j.result.error.empty())
        j.result.error = "the model's logits were not finite at position " + std::to_string(p);
      j.result.token_logprobs[size_t(p)] = rows_at(p + 1).logprob_in[size_t((p + 1) % B)];
    }
    for (const auto& [b, id] : j.fresh) {
      BlockRows br;
      const int64_t end = std::min<int64_t>((b + 1) * B, int64_t(j.result.greedy_ids.size()));
      for (int64_t q = b * B; q < end; ++q) {
        br.greedy.push_back(j.result.greedy_ids[size_t(q)]);
        br.logprob_in.push_back(q > 0 ? j.result.token_logprobs[size_t(q - 1)] : 0.0);
      }
      kept_rows[id] = std::move(br);
    }
    cache.unpin(j.pins);
    j.pins.clear();
    j.chain.clear();
    j.fresh.clear();
  };

  auto report_ready = [&] {
    while (next_done < jobs.size() && jobs[next_done].chunks_left == 0 && jobs[next_done].result.request) {
      Job& j = jobs[next_done];
      fill_shared(j);
      if (j.npy && j.result.error.empty()) {
        try {
          j.npy->close();
        } catch (const Error& e) {
          j.result.error = e.what();
        }
      }
      j.npy.reset();
      done(j.result);
      j.result = ScoreResult{};
      ++next_done;
    }
  };

  SamplingParams greedy;  // the greedy choice of each row, among the tokenizer's ids
  greedy.token_limit = opts_.token_limit;
  std::vector<int32_t> released;  // slots of sequences whose last chunk was submitted
  auto collect = [&] {
    StepOutput out = runner_.next();
    Chunk c = in_flight.front();
    in_flight.pop_front();
    Job& j = jobs[c.job];
    const auto& ids = j.result.request->token_ids;
    const int64_t T = int64_t(ids.size());
    for (int64_t i = 0; i < c.n; ++i) {
      const float* row = &out.logits[size_t(i * vocab)];
      if (out.tokens[size_t(i)] < 0 && j.result.error.empty())
        j.result.error = "the model's logits were not finite at position " + std::to_string(c.begin + i);
      j.result.greedy_ids.push_back(out.tokens[size_t(i)]);
      if (c.begin + i + 1 < T)
        j.result.token_logprobs.push_back(token_logprob(row, vocab, ids[size_t(c.begin + i + 1)]));
    }
    if (j.npy && j.result.error.empty()) {
      try {
        j.npy->append(out.logits.data(), c.n);
      } catch (const Error& e) {
        j.result.error = e.what();
      }
    }
    --j.chunks_left;
    report_ready();
  };

  bool stopped = false;
  for (size_t k = 0; k < requests.size() && !stopped; ++k) {
    const ScoreRequest& req = *requests[k];
    Job& j = jobs[k];
    j.result.request = &req;
    const int64_t T = int64_t(req.token_ids.size());
    j.chunks_left = (T + chunk - 1) / chunk;
    if (opts_.token_limit > 0)
      for (int64_t p = 0; p < T; ++p)
        if (req.token_ids[size_t(p)] >= opts_.token_limit) j.result.unknown_positions.push_back(p);
    if (!opts_.logits_dir.empty()) {
      try {
        if (!is_safe_file_id(req.id))
          throw InputError("id \"" + req.id + "\" cannot name a logits file (no '/', no leading '.')");
        j.npy = std::make_unique<NpyRowWriter>(opts_.logits_dir + "/" + req.id + ".npy", T, vocab);
      } catch (const Error& e) {
        j.result.error = e.what();
        j.chunks_left = 0;
        report_ready();
        continue;
      }
    }
    // One sequence at a time holds cache blocks of its own (its slot is
    // released right after its last chunk), so a sequence fits when one pool
    // can hold it; kept blocks make room by eviction.
    if (!kv.fits_empty(T)) {
      j.result.error = std::to_string(T) + " tokens are more than the KV-cache pool's " +
                       std::to_string(kv.pool_positions()) + " positions (raise --kv-cache-tokens)";
      j.chunks_left = 0;
      report_ready();
      continue;
    }
    // The slot: in the pool that shares the most of the sequence (the
    // pools are the ranks' in expert parallel); any slot of a pool will do.
    // It computes from the last position it matched: that row's logits give
    // the log-prob of its own next token.
    int32_t slot = int32_t(k % size_t(runner_.slots()));
    for (int32_t p = 0; sharing && p < kv.pools() && p < runner_.slots(); ++p) {
      const auto m = cache.match(p, req.token_ids);
      const auto plan = cache.plan(m, std::max<int64_t>(0, m.tokens(int32_t(B)) - 1));
      if (plan.start > j.plan.start) {
        j.plan = plan;
        slot = p;
      }
    }
    cache.pin(j.plan.pins);
    auto need = [&] { return std::max<int64_t>(0, kv.blocks_for(T) - int64_t(j.plan.share.size())); };
    while (!ledger.can_reserve_blocks(slot, need())) {
      if (const int32_t gone = cache.evict(kv.pool_of(slot), pending_ops); gone != PrefixCache::kNone) {
        kept_rows.erase(gone);
        continue;
      }
      if (!in_flight.empty()) {
        collect();  // an earlier request's report unpins its blocks
        continue;
      }
      // The blocks it would read, pinned, leave too little room (a pool
      // about one sequence large): it computes from position 0 instead.
      if (j.plan.pins.empty()) throw Error("scorer: the KV-cache pool has no room for a sequence that fits it");
      cache.unpin(j.plan.pins);
      j.plan = PrefixCache::Plan{};
    }
    j.pins = j.plan.pins;
    j.chain = j.plan.share;
    ledger.reserve_blocks(slot, need());
    PrefixCache::plan_ops(slot, j.plan, pending_ops);
    const int64_t start = j.plan.start;
    j.chunks_left = (T - start + chunk - 1) / chunk;
    j.result.greedy_ids.assign(size_t(start), 0);
    j.result.token_logprobs.assign(size_t(start), 0.0);
    reused_ += start;
    // Its blocks, kept by the step after the one that completes them (once
    // that one has written them on every rank): full ones as chunks complete
    // them, the partial last one after its last chunk.
    int64_t keep_from = int64_t(j.plan.share.size());
    auto keep_upto = [&](int64_t upto) {
      for (; sharing && keep_from * B < upto; ++keep_from) {
        const int64_t n = std::min(B, upto - keep_from * B);
        if (n < B && upto < T) break;  // a partial block is still being written
        const int32_t parent = j.chain.empty() ? PrefixCache::kNone : j.chain.back();
        const auto span = std::span<const int32_t>(req.token_ids).subspan(size_t(keep_from * B), size_t(n));
        const PrefixCache::Kept kept = cache.keep(slot, parent, int32_t(keep_from), span, pending_ops);
        j.pins.push_back(kept.id);
        if (n == B) j.chain.push_back(kept.id);
        if (kept.fresh) j.fresh.push_back({keep_from, kept.id});
      }
    };
    for (int64_t begin = start; begin < T; begin += chunk) {
      // A stop mid-sequence leaves it unreported (a rerun scores it again).
      if (opts_.should_stop && opts_.should_stop()) {
        stopped = true;
        break;
      }
      const int64_t n = std::min(chunk, T - begin);
      StepInput in;
      in.return_logits = true;
      for (int64_t p = begin; p < begin + n; ++p) {
        in.tokens.push_back(req.token_ids[size_t(p)]);
        in.batch.rows.push_back({slot, int32_t(p)});
        in.logit_rows.push_back(p - begin);
        if (opts_.token_limit > 0) in.sampling.push_back(greedy);
      }
      in.batch.released = std::move(released);  // applied on every rank before this step's rows
      released.clear();
      in.batch.prefix_ops = std::move(pending_ops);
      pending_ops.clear();
      while (int(in_flight.size()) >= M) collect();
      runner_.submit(k, in);
      in_flight.push_back({k, begin, n});
      keep_upto(begin + n);
    }
    released.push_back(slot);  // every later step runs after this sequence's chunks, on every stage
    ledger.release(slot);
    tokens_ += T - start;
  }
  while (!in_flight.empty()) collect();
  report_ready();
  if (!stopped) cache.check_drained("scorer");
  return !stopped;
}

}  // namespace trillion
