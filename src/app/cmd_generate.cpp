// trillion generate --model DIR --prompts REQ.jsonl --output RES.jsonl
#include <chrono>
#include <cstdio>
#include <variant>

#include "app/commands.hpp"
#include "app/run_options.hpp"
#include "common/error.hpp"
#include "engine/generator.hpp"
#include "engine/jsonl.hpp"
#include "engine/request.hpp"

namespace po = boost::program_options;

namespace trillion::app {

namespace {

int generate_on_rank0(Cluster& cluster, const RunOptions& ro, const std::string& prompts, const std::string& output) {
  StepRunner& runner = cluster.runner();
  const auto lines = read_jsonl_lines(prompts);
  std::vector<Parsed<GenerateRequest>> parsed;
  for (const auto& l : lines) parsed.push_back(parse_generate_request(l, runner.vocab_size(), runner.max_len()));
  reject_duplicate_ids(parsed);

  JsonlWriter out(output, /*append=*/false);
  int64_t errors = 0;
  const std::vector<const GenerateRequest*> runnable = runnable_requests(parsed, out, "trillion generate", prompts, &errors);

  Generator gen(runner, cluster.config(), GeneratorOptions{ro.step_tokens});
  size_t done = 0;
  int64_t generated = 0;
  const auto t0 = std::chrono::steady_clock::now();
  gen.run(runnable, [&](const GenerationResult& r) {
    const int64_t prompt = int64_t(r.request->prompt_token_ids.size());
    const int64_t completion = int64_t(r.token_ids.size());
    out.write({{"id", r.request->id},
               {"token_ids", r.token_ids},
               {"finish_reason", r.finish_reason},
               {"usage",
                {{"prompt_tokens", prompt},
                 {"completion_tokens", completion},
                 {"total_tokens", prompt + completion}}}});
    ++done;
    generated += completion;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "trillion generate: %zu/%zu done, %.1f s\n", done, runnable.size(), secs);
  });
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto& st = gen.stats();
  const double gen_tps = wall > 0 ? double(generated) / wall : 0.0;
  std::fprintf(stderr,
               "trillion generate: %zu requests (%lld errors); %lld prompt tokens, %lld generated in %.2f s "
               "(%.1f generated tokens/s)\n",
               runnable.size(), (long long)errors, (long long)st.prefill_tokens,
               (long long)generated, wall, gen_tps);
  cluster.finish({{"command", "generate"},
                  {"requests", {{"total", parsed.size()}, {"errors", errors}}},
                  {"steps", st.steps},
                  {"tokens", {{"prefill", st.prefill_tokens}, {"decode", st.decode_tokens},
                              {"generated", generated}}},
                  {"seconds", {{"generation", wall}, {"prefill_steps", st.prefill_seconds},
                               {"decode_steps", st.decode_seconds}}},
                  {"tokens_per_second",
                   {{"prefill", st.prefill_seconds > 0 ? double(st.prefill_tokens) / st.prefill_seconds : 0.0},
                    {"decode", st.decode_seconds > 0 ? double(st.decode_tokens) / st.decode_seconds : 0.0},
                    {"generated", gen_tps}}}});
  return 0;
}

}  // namespace

int run_generate(const Args& args) {
  RunOptions ro;
  std::string prompts, output;
  po::options_description desc("options");
  add_run_options(desc, ro);
  desc.add_options()
      ("prompts", po::value(&prompts)->required(),
       "requests, JSONL: {\"id\", \"prompt_token_ids\": [...], \"max_tokens\": N}")
      ("output", po::value(&output)->required(), "results, JSONL (one line per request)");
  if (!parse_args(args, "usage: trillion generate --model DIR --prompts REQ.jsonl --output RES.jsonl", desc))
    return 0;
  Cluster cluster(ro);
  return cluster.guarded([&] {
    if (!cluster.coordinator()) {
      cluster.serve();
      cluster.finish({});
      return 0;
    }
    return generate_on_rank0(cluster, ro, prompts, output);
  });
}

}  // namespace trillion::app
