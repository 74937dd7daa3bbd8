// trillion generate --model DIR --prompts REQ.jsonl --output RES.jsonl
#include <chrono>
#include <ctime>
#include <filesystem>
#include <cstdio>
#include <variant>

#include "app/commands.hpp"
#include "app/cluster.hpp"
#include "app/prompt_codec.hpp"
#include "common/error.hpp"
#include "engine/generator.hpp"
#include "engine/jsonl.hpp"
#include "engine/request.hpp"
#include "engine/result_format.hpp"
#include "engine/run_progress.hpp"

namespace po = boost::program_options;

namespace trillion::app {

namespace {

int generate_on_rank0(Cluster& cluster, const RunOptions& ro, const std::string& prompts, const std::string& output,
                      bool restart, bool strict) {
  StepRunner& runner = cluster.runner();
  const auto lines = read_jsonl_lines(prompts);
  std::vector<Parsed<GenerateRequest>> parsed;
  for (const auto& l : lines) parsed.push_back(parse_generate_request(l, runner.vocab_size(), runner.max_len()));
  settle_error_forms(parsed);
  // Text and messages prompts go through the model directory's tokenizer and chat template.
  const TextSupport text = load_text_support(ro.model_dir);
  if (!text.note.empty()) std::fprintf(stderr, "trillion generate: %s\n", text.note.c_str());
  tokenize_prompts(parsed, &text.codec, runner.vocab_size(), runner.max_len());
  reject_unfittable(parsed, runner.max_len(), runner.kv_block_tokens(), runner.kv_pool_blocks());
  reject_duplicate_ids(parsed);
  if (strict) {
    if (std::string e = first_error(parsed, prompts); !e.empty()) throw InputError(e + " (--strict)");
  }
  const size_t total = parsed.size();
  const int64_t skipped = drop_finished(parsed, prepare_output(output, restart, "trillion generate"));
  if (skipped)
    std::fprintf(stderr, "trillion generate: resuming: %lld of %zu requests already in %s\n", (long long)skipped,
                 total, output.c_str());

  JsonlWriter out(output, /*append=*/!restart);
  int64_t errors = 0;
  const std::vector<const GenerateRequest*> runnable = runnable_requests(parsed, out, "trillion generate", prompts, &errors);
  RunProgress progress("trillion generate", int64_t(runnable.size()));
  ResultContext ctx;
  ctx.model = std::filesystem::path(ro.model_dir).lexically_normal().filename().string();
  if (ctx.model.empty()) ctx.model = std::filesystem::path(ro.model_dir).lexically_normal().parent_path().filename().string();
  ctx.created = int64_t(std::time(nullptr));
  ctx.decode = text.decode;

  GeneratorOptions gopts;
  gopts.step_tokens = ro.step_tokens;
  gopts.text_stream = text.text_stream;  // stop strings are matched here, on rank 0, which runs the generator
  int64_t generated = 0, done = 0;
  const auto t0 = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  const Generator* gen_ptr = nullptr;
  // The run's figures so far (running --metrics updates) or at the end.
  auto figures = [&] {
    const GeneratorStats& st = gen_ptr->stats();
    const double wall = seconds();
    return nlohmann::json{
        {"command", "generate"},
        {"requests", {{"total", total}, {"errors", errors}, {"skipped", skipped}, {"done", done},
                      {"to_run", runnable.size()}}},
        {"steps", st.steps},
        {"tokens", {{"prefill", st.prefill_tokens}, {"decode", st.decode_tokens}, {"generated", generated}}},
        {"seconds", {{"generation", wall}, {"prefill_steps", st.prefill_seconds}, {"decode_steps", st.decode_seconds}}},
        {"tokens_per_second",
         {{"prefill", st.prefill_seconds > 0 ? double(st.prefill_tokens) / st.prefill_seconds : 0.0},
          {"decode", st.decode_seconds > 0 ? double(st.decode_tokens) / st.decode_seconds : 0.0},
          {"generated", wall > 0 ? double(generated) / wall : 0.0}}}};
  };
  gopts.after_step = [&] { cluster.progress_metrics(figures); };
  Generator gen(runner, cluster.config(), gopts);
  gen_ptr = &gen;
  gen.run(runnable, [&](const GenerationResult& r) {
    const int64_t completion = int64_t(r.token_ids.size());
    out.write(result_record(r, ctx));
    generated += completion;
    ++done;
    progress.request_done(completion);
  });
  progress.finish();
  const nlohmann::json fig = figures();
  std::fprintf(stderr,
               "trillion generate: %zu requests (%lld errors); %lld prompt tokens, %lld generated in %.2f s "
               "(%.1f generated tokens/s)\n",
               runnable.size(), (long long)errors, (long long)gen.stats().prefill_tokens, (long long)generated,
               fig["seconds"]["generation"].get<double>(), fig["tokens_per_second"]["generated"].get<double>());
  cluster.finish(fig);
  return 0;
}

}  // namespace

int run_generate(const Args& args) {
  RunOptions ro;
  std::string prompts, output;
  bool restart = false, strict = false;
  po::options_description desc("options");
  add_run_options(desc, ro);
  desc.add_options()
      ("prompts", po::value(&prompts)->required(),
       "requests, JSONL: {\"id\", \"prompt_token_ids\": [...], \"max_tokens\": N, sampling...} or OpenAI Batch lines")
      ("output", po::value(&output)->required(),
       "results, JSONL (one line per request); an existing file is resumed: requests with a result are skipped")
      ("restart", po::bool_switch(&restart), "overwrite --output instead of resuming it")
      ("strict", po::bool_switch(&strict), "abort on the first bad request line instead of writing an error record");
  if (!parse_args(args, "usage: trillion generate --model DIR --prompts REQ.jsonl --output RES.jsonl", desc))
    return 0;
  Cluster cluster(ro);
  return cluster.guarded([&] {
    if (!cluster.coordinator()) {
      cluster.serve();
      cluster.finish({});
      return 0;
    }
    return generate_on_rank0(cluster, ro, prompts, output, restart, strict);
  });
}

}  // namespace trillion::app
