// trillion score --model DIR --input REQ.jsonl --output RES.jsonl [--logits-out DIR]
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <variant>

#include "app/commands.hpp"
#include "app/cluster.hpp"
#include "common/error.hpp"
#include "engine/jsonl.hpp"
#include "engine/request.hpp"
#include "engine/run_progress.hpp"
#include "engine/scorer.hpp"

namespace po = boost::program_options;

namespace trillion::app {

namespace {

int score_on_rank0(Cluster& cluster, const RunOptions& ro, const std::string& input, const std::string& output,
                   const std::string& logits_dir, bool restart, bool strict) {
  StepRunner& runner = cluster.runner();
  const auto lines = read_jsonl_lines(input);
  if (!logits_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(logits_dir, ec);
    if (ec) throw SystemError(logits_dir + ": cannot create directory: " + ec.message());
  }
  std::vector<Parsed<ScoreRequest>> requests;
  for (const auto& l : lines) requests.push_back(parse_score_request(l, runner.vocab_size(), runner.max_len()));
  reject_duplicate_ids(requests);
  if (strict) {
    if (std::string e = first_error(requests, input); !e.empty()) throw InputError(e + " (--strict)");
  }
  const size_t total = requests.size();
  const int64_t skipped = drop_finished(requests, prepare_output(output, restart, "trillion score"));
  if (skipped)
    std::fprintf(stderr, "trillion score: resuming: %lld of %zu requests already in %s\n", (long long)skipped, total,
                 output.c_str());

  JsonlWriter out(output, /*append=*/!restart);
  int64_t errors = 0;
  const std::vector<const ScoreRequest*> runnable = runnable_requests(requests, out, "trillion score", input, &errors);
  RunProgress progress("trillion score", int64_t(runnable.size()));
  Scorer scorer(runner, ScorerOptions{ro.step_tokens, logits_dir});
  const auto t0 = std::chrono::steady_clock::now();
  int64_t done = 0;
  // The run's figures so far (running --metrics updates, after each request) or at the end.
  auto figures = [&] {
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double tps = secs > 0 ? double(scorer.tokens_scored()) / secs : 0.0;
    return nlohmann::json{{"command", "score"},
                          {"requests", {{"total", total}, {"errors", errors}, {"skipped", skipped}, {"done", done},
                                        {"to_run", runnable.size()}}},
                          {"tokens", {{"prefill", scorer.tokens_scored()}, {"decode", 0}}},
                          {"seconds", {{"prefill", secs}, {"decode", 0.0}}},
                          {"tokens_per_second", {{"prefill", tps}, {"decode", 0.0}}}};
  };
  scorer.run(runnable, [&](const ScoreResult& res) {
    const ScoreRequest& r = *res.request;
    progress.request_done(int64_t(r.token_ids.size()));
    ++done;
    cluster.progress_metrics(figures);
    if (!res.error.empty()) {
      out.write(error_record(RequestError{r.line, r.id, res.error}));
      ++errors;
      return;
    }
    double total = 0;
    for (double lp : res.token_logprobs) total += lp;
    out.write({{"id", r.id},
               {"num_tokens", r.token_ids.size()},
               {"token_logprobs", res.token_logprobs},
               {"total_logprob", total},
               {"greedy_token_ids", res.greedy_ids}});
  });
  progress.finish();
  const nlohmann::json fig = figures();
  std::fprintf(stderr, "trillion score: %zu requests (%lld errors), %lld tokens in %.2f s (%.1f tokens/s)\n",
               total, (long long)errors, (long long)scorer.tokens_scored(), fig["seconds"]["prefill"].get<double>(),
               fig["tokens_per_second"]["prefill"].get<double>());
  cluster.finish(fig);
  return 0;
}

}  // namespace

int run_score(const Args& args) {
  RunOptions ro;
  std::string input, output, logits_dir;
  bool restart = false, strict = false;
  po::options_description desc("options");
  add_run_options(desc, ro);
  desc.add_options()
      ("input", po::value(&input)->required(), "requests, JSONL: {\"id\", \"token_ids\": [...]}")
      ("output", po::value(&output)->required(),
       "results, JSONL (one line per request); an existing file is resumed: requests with a result are skipped")
      ("restart", po::bool_switch(&restart), "overwrite --output instead of resuming it")
      ("strict", po::bool_switch(&strict), "abort on the first bad request line instead of writing an error record")
      ("logits-out", po::value(&logits_dir), "write DIR/<id>.npy: float32 logits [len, vocab]");
  if (!parse_args(args, "usage: trillion score --model DIR --input REQ.jsonl --output RES.jsonl", desc))
    return 0;
  Cluster cluster(ro);
  return cluster.guarded([&] {
    if (!cluster.coordinator()) {
      cluster.serve();
      cluster.finish({});
      return 0;
    }
    return score_on_rank0(cluster, ro, input, output, logits_dir, restart, strict);
  });
}

}  // namespace trillion::app
