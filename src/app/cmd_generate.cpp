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

int run_generate(const Args& args) {
  RunOptions ro;
  std::string prompts, output;
  po::options_description desc("options");
  add_run_options(desc, ro);
  desc.add_options()
      ("prompts", po::value(&prompts)->required(),
       "requests, JSONL: {\"id\", \"prompt_token_ids\": [...], \"max_tokens\": N}")
      ("output", po::value(&output)->required(), "results, JSONL (one line per request)");
  if (!parse_args(args, "usage: trillion generate --model DIR --prompts REQ.jsonl --output RES.jsonl",
                  desc))
    return 0;

  const auto lines = read_jsonl_lines(prompts);
  LoadedModel m = load_model(ro);
  std::vector<Parsed<GenerateRequest>> parsed;
  for (const auto& l : lines)
    parsed.push_back(parse_generate_request(l, m.runner->vocab_size(), m.runner->max_len()));
  reject_duplicate_ids(parsed);

  JsonlWriter out(output, /*append=*/false);
  std::vector<const GenerateRequest*> runnable;
  int64_t errors = 0;
  for (const auto& p : parsed) {
    if (const auto* e = std::get_if<RequestError>(&p)) {
      std::fprintf(stderr, "trillion generate: %s line %lld: %s\n", prompts.c_str(), (long long)e->line,
                   e->message.c_str());
      out.write(error_record(*e));
      ++errors;
    } else {
      runnable.push_back(&std::get<GenerateRequest>(p));
    }
  }

  Generator gen(*m.runner, m.store->config(), GeneratorOptions{ro.step_tokens});
  size_t done = 0;
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
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "trillion generate: %zu/%zu done, %.1f s\n", done, runnable.size(), secs);
  });
  const auto& st = gen.stats();
  std::fprintf(stderr,
               "trillion generate: %zu requests (%lld errors); prefill %lld tokens in %.2f s (%.1f tokens/s); "
               "decode %lld tokens in %.2f s (%.1f tokens/s)\n",
               runnable.size(), (long long)errors, (long long)st.prefill_tokens, st.prefill_seconds,
               st.prefill_seconds > 0 ? double(st.prefill_tokens) / st.prefill_seconds : 0.0,
               (long long)st.decode_tokens, st.decode_seconds,
               st.decode_seconds > 0 ? double(st.decode_tokens) / st.decode_seconds : 0.0);
  return 0;
}

}  // namespace trillion::app
