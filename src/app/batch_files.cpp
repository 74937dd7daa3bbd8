#include "app/batch_files.hpp"

#include <cstdio>

#include "common/error.hpp"
#include "requests/request_checks.hpp"

namespace trillion::app {

FinishedResults prepare_output(const std::string& path, bool restart, const char* command) {
  if (restart) return {};
  FinishedResults f = recover_results(path);
  if (f.torn_bytes)
    std::fprintf(stderr, "%s: %s: cut a torn last line (%lld bytes) left by an interrupted run\n", command,
                 path.c_str(), (long long)f.torn_bytes);
  return f;
}

template <class R>
nlohmann::json BatchFiles<R>::requests_json(int64_t done) const {
  return {{"total", total}, {"errors", errors}, {"failed", failed}, {"skipped", skipped}, {"done", done}, {"to_run", runnable.size()}};
}

template <class R>
BatchFiles<R> open_batch(std::vector<Parsed<R>>& parsed, const BatchPaths& paths) {
  reject_duplicate_ids(parsed);
  if (paths.strict) {
    if (std::string e = first_error(parsed, paths.input); !e.empty()) throw InputError(e + " (--strict)");
  }
  BatchFiles<R> files;
  files.total = int64_t(parsed.size());
  files.skipped = drop_finished(parsed, prepare_output(paths.output, paths.restart, paths.command));
  if (files.skipped)
    std::fprintf(stderr, "%s: resuming: %lld of %lld requests already in %s\n", paths.command,
                 (long long)files.skipped, (long long)files.total, paths.output.c_str());
  files.out = std::make_unique<JsonlWriter>(paths.output, /*append=*/!paths.restart);
  files.runnable = runnable_requests(parsed, *files.out, paths.command, paths.input, &files.errors);
  return files;
}

template struct BatchFiles<ScoreRequest>;
template struct BatchFiles<GenerateRequest>;
template BatchFiles<ScoreRequest> open_batch(std::vector<Parsed<ScoreRequest>>&, const BatchPaths&);
template BatchFiles<GenerateRequest> open_batch(std::vector<Parsed<GenerateRequest>>&, const BatchPaths&);

}  // namespace trillion::app
