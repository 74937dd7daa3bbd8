// trillion generate --model DIR --prompts REQ.jsonl --output RES.jsonl
#include <chrono>
#include <ctime>
#include <filesystem>
#include <cstdio>

#include "app/batch_job.hpp"
#include "app/cluster.hpp"
#include "app/commands.hpp"
#include "text/model_text.hpp"
#include "common/fault.hpp"
#include "requests/request_checks.hpp"
#include "requests/result_format.hpp"
#include "scheduler/kv_admission.hpp"
#include "scheduler/scheduler.hpp"

namespace po = boost::program_options;

namespace trillion::app {

namespace {

// The OpenAI records' model name (the model directory's name) and creation time; text through the codec.
ResultContext result_context(const std::string& model_dir, const TextSupport& text) {
  ResultContext ctx;
  const std::filesystem::path dir = std::filesystem::path(model_dir).lexically_normal();
  ctx.model = dir.filename().string();
  if (ctx.model.empty()) ctx.model = dir.parent_path().filename().string();  // "models/kjv/"
  ctx.created = int64_t(std::time(nullptr));
  ctx.decode = text.codec.decode;
  return ctx;
}

SchedulerOptions scheduler_options(const RunOptions& ro, const TextSupport& text, int64_t vocab, const char* command) {
  SchedulerOptions sopts;
  sopts.step_tokens = ro.step_tokens;
  sopts.speculative = !ro.speculative.empty();
  sopts.prefix_sharing = ro.prefix_sharing;
  sopts.text_stream = text.codec.stream;  // stop strings are matched here, on rank 0, which runs the scheduler
  // lm_head rows past the tokenizer (vocabulary padding) have no text: never choose them.
  if (text.vocab_size > 0 && text.vocab_size < vocab) {
    sopts.token_limit = text.vocab_size;
    std::fprintf(stderr, "%s: ids %d..%lld have no token in the tokenizer: never sampled\n", command,
                 text.vocab_size, (long long)vocab - 1);
  }
  return sopts;
}

// The run's figures for --metrics (docs/metrics.md): `wall` seconds since the
// first request's step (after the warm-up), `generated` tokens so far.
nlohmann::json generate_figures(const SchedulerStats& st, const nlohmann::json& requests, double wall,
                                int64_t generated, const Cluster& cluster, const std::string& speculative) {
  nlohmann::json j{
      {"command", "generate"},
      {"requests", requests},
      {"steps", st.steps},
      {"tokens",
       {{"prefill", st.prefill_tokens},
        {"prefill_reused", st.prefill_reused},
        {"decode", st.decode_tokens},
        {"generated", generated}}},
      {"seconds",
       {{"generation", wall},
        {"prefill_steps", st.prefill_seconds},
        {"decode_steps", st.decode_seconds},
        {"first_step", st.first_step_seconds},
        // From the process's start (before MPI_Init) to its first step's
        // submission (the warm-up's, with one): loading, mapping, allocating.
        {"start_to_first_step", st.first_submitted ? cluster.seconds_until(*st.first_submitted) : 0.0},
        {"warmup", st.warmup_seconds}}},
      {"first_step_rows", st.first_step_rows},
      {"tokens_per_second",
       {{"prefill", st.prefill_seconds > 0 ? double(st.prefill_tokens) / st.prefill_seconds : 0.0},
        {"decode", st.decode_seconds > 0 ? double(st.decode_tokens) / st.decode_seconds : 0.0},
        {"generated", wall > 0 ? double(generated) / wall : 0.0}}}};
  if (!speculative.empty())
    j["speculative"] = {{"method", speculative},
                        {"drafted", st.drafted},
                        {"accepted", st.accepted},
                        {"acceptance_rate", st.drafted > 0 ? double(st.accepted) / double(st.drafted) : 0.0},
                        {"tokens_per_step", st.steps > 0 ? double(generated) / double(st.steps) : 0.0}};
  return j;
}

// A result's record. A request that cannot be turned into its record (its
// text, its logprobs) fails alone, as an error record naming why (`failure`);
// a write that fails (a full disk) ends the job (BatchJob).
nlohmann::json record_of(const GenerationResult& r, const ResultContext& ctx, std::string& failure) {
  try {
    return result_record(r, ctx);
  } catch (const std::exception& e) {
    GenerationResult bad = r;
    bad.error = failure = std::string("cannot format the result: ") + e.what();
    return result_record(bad, ctx);
  }
}

void print_summary(const BatchJob<GenerateRequest>& job, const SchedulerStats& st, const nlohmann::json& fig,
                   int64_t generated) {
  if (fig.contains("speculative"))
    std::fprintf(stderr, "%s: speculative (%s): %lld drafts, %lld accepted (%.1f%%)\n", job.command(),
                 fig["speculative"]["method"].get<std::string>().c_str(), (long long)st.drafted,
                 (long long)st.accepted, 100.0 * fig["speculative"]["acceptance_rate"].get<double>());
  std::fprintf(stderr,
               "%s: %zu requests (%lld bad lines, %lld failed); %lld prompt tokens computed, %lld read from shared "
               "prefixes, %lld generated in %.2f s (%.1f generated tokens/s)\n",
               job.command(), job.runnable().size(), (long long)job.bad_lines(), (long long)job.failed(),
               (long long)st.prefill_tokens, (long long)st.prefill_reused, (long long)generated,
               fig["seconds"]["generation"].get<double>(), fig["tokens_per_second"]["generated"].get<double>());
}

nlohmann::json generate_on_rank0(Cluster& cluster, StepRunner& runner, const RunOptions& ro, const BatchPaths& paths,
                                 bool warmup) {
  std::vector<Parsed<GenerateRequest>> parsed;
  for (const auto& l : read_jsonl_lines(paths.input))
    parsed.push_back(parse_generate_request(l, runner.vocab_size(), runner.max_len()));
  settle_error_forms(parsed);
  // Text and messages prompts go through the model directory's tokenizer and chat template.
  const TextSupport text = load_text_support(ro.model_dir);
  if (!text.note.empty()) std::fprintf(stderr, "%s: %s\n", paths.command, text.note.c_str());
  tokenize_prompts(parsed, &text.codec, runner.vocab_size(), runner.max_len());
  reject_unfittable(parsed, runner.max_len(), runner.kv_pools());
  BatchJob<GenerateRequest> job(cluster, paths, parsed);
  const ResultContext ctx = result_context(ro.model_dir, text);
  SchedulerOptions sopts = scheduler_options(ro, text, runner.vocab_size(), paths.command);
  int64_t generated = 0;
  auto t0 = std::chrono::steady_clock::now();
  const Scheduler* sched = nullptr;
  // The run's figures so far (running --metrics updates) or at the end.
  auto figures = [&] {
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return generate_figures(sched->stats(), job.requests_json(), wall, generated, cluster, ro.speculative);
  };
  int64_t prefill_seen = 0;  // prompt tokens submitted as of the last step's return
  sopts.after_step = [&] {
    const int64_t prefill = sched->stats().prefill_tokens;
    fault_point(prefill > prefill_seen ? "prefill" : "decode");  // test hook (common/fault.hpp)
    prefill_seen = prefill;
    job.progress_metrics();
  };
  sopts.should_stop = [&] { return job.should_stop(); };
  Scheduler scheduler(runner, cluster.config(), sopts);
  sched = &scheduler;
  job.set_figures(figures);
  if (warmup && !job.runnable().empty()) {
    scheduler.warm_up(ro.step_tokens);
    std::fprintf(stderr, "%s: warm-up step: %lld rows in %.2f s (not timed; --no-warmup skips it)\n", paths.command,
                 (long long)scheduler.stats().warmup_rows, scheduler.stats().warmup_seconds);
    t0 = std::chrono::steady_clock::now();  // the run's time starts after it
  }
  const bool completed = scheduler.run(job.runnable(), [&](const GenerationResult& r) {
    const int64_t completion = int64_t(r.token_ids.size());
    std::string failure = r.error;
    const nlohmann::json record = record_of(r, ctx, failure);
    generated += completion;
    job.finished(*r.request, failure, record, completion);
  });
  const nlohmann::json fig = figures();
  if (job.complete(completed)) print_summary(job, scheduler.stats(), fig, generated);
  return fig;
}

}  // namespace

int run_generate(const Args& args) {
  RunOptions ro;
  BatchPaths paths;
  bool no_warmup = false;
  paths.command = "trillion generate";
  po::options_description desc("options");
  add_run_options(desc, ro);
  desc.add_options()
      ("prompts", po::value(&paths.input)->required(),
       "requests, JSONL: {\"id\", \"prompt_token_ids\": [...], \"max_tokens\": N, sampling...} or OpenAI Batch lines")
      ("output", po::value(&paths.output)->required(),
       "results, JSONL (one line per request); an existing file is resumed: requests with a result are skipped")
      ("restart", po::bool_switch(&paths.restart), "overwrite --output instead of resuming it")
      ("speculative", po::value(&ro.speculative),
       "mtp: speculative decoding with the model's multi-token-prediction layer (same greedy tokens, same "
       "sampling distribution; fewer steps when its drafts are accepted)")
      ("strict", po::bool_switch(&paths.strict), "abort on the first bad request line instead of writing an error record")
      ("no-warmup", po::bool_switch(&no_warmup),
       "skip the warm-up: one untimed prefill step of --step-tokens rows of throwaway tokens before the first "
       "request, which reads every weight (and routes to every expert) the way steps do");
  if (!parse_args(args, "usage: trillion generate --model DIR --prompts REQ.jsonl --output RES.jsonl", desc))
    return 0;
  Cluster cluster(ro);
  return cluster.run([&](StepRunner& runner) { return generate_on_rank0(cluster, runner, ro, paths, !no_warmup); });
}

}  // namespace trillion::app
