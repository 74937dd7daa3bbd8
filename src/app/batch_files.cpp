#include "app/batch_files.hpp"

#include <cstdio>

#include "common/error.hpp"
#include "common/interrupt.hpp"
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
void BatchFiles<R>::write(const nlohmann::json& record) {
  if (!write_error.empty()) return;
  try {
    out->write(record);
  } catch (const SystemError& e) {
    write_error = e.what();
  }
}

template <class R>
int BatchFiles<R>::end_early(const BatchPaths& paths, StopRelay::Stop stop) const {
  const std::string have = std::to_string(skipped + out->records()) + " of " + std::to_string(total) +
                           " requests have results in " + paths.output;
  if (!write_error.empty()) {
    std::fprintf(stderr, "%s: error: %s; %s; make room and rerun the same command to resume\n", paths.command,
                 write_error.c_str(), have.c_str());
    return 1;
  }
  const std::string by = stop.rank == 0 ? "" : " (received by rank " + std::to_string(stop.rank) + ")";
  std::fprintf(stderr, "%s: interrupted by %s%s: %s; rerun the same command to resume\n", paths.command,
               signal_name(stop.signal).c_str(), by.c_str(), have.c_str());
  return exit_code_for(stop.signal);
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
