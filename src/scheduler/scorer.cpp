#include "scheduler/scorer.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <memory>

#include "common/error.hpp"
#include "common/npy.hpp"

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

  auto report_ready = [&] {
    while (next_done < jobs.size() && jobs[next_done].chunks_left == 0 && jobs[next_done].result.request) {
      Job& j = jobs[next_done];
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
    const int32_t slot = int32_t(k % size_t(runner_.slots()));
    // One sequence at a time holds cache blocks (its slot is released right
    // after its last chunk), so a sequence fits when one pool can hold it.
    if (const KvPools kv = runner_.kv_pools(); !kv.fits_empty(T)) {
      j.result.error = std::to_string(T) + " tokens are more than the KV-cache pool's " +
                       std::to_string(kv.pool_positions()) + " positions (raise --kv-cache-tokens)";
      j.chunks_left = 0;
      report_ready();
      continue;
    }
    for (int64_t begin = 0; begin < T; begin += chunk) {
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
      while (int(in_flight.size()) >= M) collect();
      runner_.submit(k, in);
      in_flight.push_back({k, begin, n});
    }
    released.push_back(slot);  // every later step runs after this sequence's chunks, on every stage
    tokens_ += T;
  }
  while (!in_flight.empty()) collect();
  report_ready();
  return !stopped;
}

}  // namespace trillion
