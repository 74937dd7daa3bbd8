// trillion score --model DIR --input REQ.jsonl --output RES.jsonl [--logits-out DIR]
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "app/batch_job.hpp"
#include "app/cluster.hpp"
#include "app/commands.hpp"
#include "text/model_text.hpp"
#include "common/error.hpp"
#include "requests/result_format.hpp"
#include "scheduler/scorer.hpp"

namespace po = boost::program_options;

namespace trillion::app {

namespace {

nlohmann::json score_on_rank0(Cluster& cluster, StepRunner& runner, const RunOptions& ro, const BatchPaths& paths,
                              const std::string& logits_dir) {
  std::vector<Parsed<ScoreRequest>> parsed;
  for (const auto& l : read_jsonl_lines(paths.input))
    parsed.push_back(parse_score_request(l, runner.vocab_size(), runner.max_len()));
  if (!logits_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(logits_dir, ec);
    if (ec) throw SystemError(logits_dir + ": cannot create directory: " + ec.message());
  }
  // The tokenizer (if the model has one) bounds the greedy ids, as in generate.
  const TextSupport text = load_text_support(ro.model_dir);
  const int32_t token_limit = text.vocab_size > 0 && text.vocab_size < runner.vocab_size() ? text.vocab_size : 0;
  if (token_limit > 0)
    std::fprintf(stderr, "%s: ids %d..%lld have no token in the tokenizer: reported as unknown_token_positions\n",
                 paths.command, token_limit, (long long)runner.vocab_size() - 1);
  BatchJob<ScoreRequest> job(cluster, paths, parsed);
  Scorer scorer(runner, ScorerOptions{ro.step_tokens, logits_dir, token_limit, [&] { return job.should_stop(); },
                                      ro.prefix_sharing});
  const auto t0 = std::chrono::steady_clock::now();
  // The run's figures so far (running --metrics updates, after each request) or at the end.
  auto figures = [&] {
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double tps = secs > 0 ? double(scorer.tokens_scored()) / secs : 0.0;
    return nlohmann::json{{"command", "score"},
                          {"requests", job.requests_json()},
                          {"tokens", {{"prefill", scorer.tokens_scored()},
                                      {"prefill_reused", scorer.tokens_reused()},
                                      {"decode", 0}}},
                          {"seconds", {{"prefill", secs}, {"decode", 0.0}}},
                          {"tokens_per_second", {{"prefill", tps}, {"decode", 0.0}}}};
  };
  job.set_figures(figures);
  const bool completed = scorer.run(job.runnable(), [&](const ScoreResult& res) {
    job.finished(*res.request, res.error, score_record(res), int64_t(res.request->token_ids.size()));
    job.progress_metrics();
  });
  const nlohmann::json fig = figures();
  if (!job.complete(completed)) return fig;
  std::fprintf(stderr,
               "%s: %lld requests (%lld bad lines, %lld failed), %lld tokens computed, %lld read from shared "
               "prefixes, in %.2f s (%.1f tokens/s)\n",
               paths.command, (long long)job.lines(), (long long)job.bad_lines(), (long long)job.failed(),
               (long long)scorer.tokens_scored(), (long long)scorer.tokens_reused(),
               fig["seconds"]["prefill"].get<double>(), fig["tokens_per_second"]["prefill"].get<double>());
  return fig;
}

}  // namespace

int run_score(const Args& args) {
  RunOptions ro;
  BatchPaths paths;
  paths.command = "trillion score";
  std::string logits_dir;
  po::options_description desc("options");
  add_run_options(desc, ro);
  desc.add_options()
      ("input", po::value(&paths.input)->required(), "requests, JSONL: {\"id\", \"token_ids\": [...]}")
      ("output", po::value(&paths.output)->required(),
       "results, JSONL (one line per request); an existing file is resumed: requests with a result are skipped")
      ("restart", po::bool_switch(&paths.restart), "overwrite --output instead of resuming it")
      ("strict", po::bool_switch(&paths.strict), "abort on the first bad request line instead of writing an error record")
      ("logits-out", po::value(&logits_dir), "write DIR/<id>.npy: float32 logits [len, vocab]");
  if (!parse_args(args, "usage: trillion score --model DIR --input REQ.jsonl --output RES.jsonl", desc))
    return 0;
  Cluster cluster(ro);
  return cluster.run([&](StepRunner& runner) { return score_on_rank0(cluster, runner, ro, paths, logits_dir); });
}

}  // namespace trillion::app
