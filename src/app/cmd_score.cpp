// trillion score --model DIR --input REQ.jsonl --output RES.jsonl [--logits-out DIR]
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "app/batch_files.hpp"
#include "app/cluster.hpp"
#include "app/commands.hpp"
#include "text/model_text.hpp"
#include "common/error.hpp"
#include "requests/result_format.hpp"
#include "app/run_progress.hpp"
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
  BatchFiles<ScoreRequest> files = open_batch(parsed, paths);
  RunProgress progress(paths.command, int64_t(files.runnable.size()));
  // A signal (on any rank) or a failed write stops the run within one step.
  auto should_stop = [&] { return !files.write_error.empty() || cluster.stop_requested().signal != 0; };
  Scorer scorer(runner, ScorerOptions{ro.step_tokens, logits_dir, token_limit, should_stop, ro.prefix_sharing});
  const auto t0 = std::chrono::steady_clock::now();
  int64_t done = 0;
  // The run's figures so far (running --metrics updates, after each request) or at the end.
  auto figures = [&] {
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double tps = secs > 0 ? double(scorer.tokens_scored()) / secs : 0.0;
    return nlohmann::json{{"command", "score"},
                          {"requests", files.requests_json(done)},
                          {"tokens", {{"prefill", scorer.tokens_scored()},
                                      {"prefill_reused", scorer.tokens_reused()},
                                      {"decode", 0}}},
                          {"seconds", {{"prefill", secs}, {"decode", 0.0}}},
                          {"tokens_per_second", {{"prefill", tps}, {"decode", 0.0}}}};
  };
  const bool finished = scorer.run(files.runnable, [&](const ScoreResult& res) {
    progress.request_done(int64_t(res.request->token_ids.size()));
    ++done;
    cluster.progress_metrics(figures);
    if (!res.error.empty()) {
      ++files.failed;
      std::fprintf(stderr, "%s: request \"%s\" (line %lld) failed: %s\n", paths.command, res.request->id.c_str(),
                   (long long)res.request->line, res.error.c_str());
    }
    files.write(score_record(res));
  });
  progress.finish();
  const nlohmann::json fig = figures();
  if (!finished || !files.write_error.empty()) {  // the last write too may fail
    cluster.end_early(files.end_early(paths, cluster.stop_requested()));
    return fig;
  }
  std::fprintf(stderr,
               "%s: %lld requests (%lld bad lines, %lld failed), %lld tokens computed, %lld read from shared "
               "prefixes, in %.2f s (%.1f tokens/s)\n",
               paths.command, (long long)files.total, (long long)files.errors, (long long)files.failed,
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
