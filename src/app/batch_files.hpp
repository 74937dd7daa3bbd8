// The request file -> result file frame both batch commands (score,
// generate) share, on rank 0: after a file's lines are parsed, the duplicate
// ids and --strict checks, resuming an earlier run's result file, and the
// writer with the bad lines' error records already written.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "requests/jsonl.hpp"
#include "requests/request.hpp"
#include "requests/resume.hpp"
#include "runtime/stop_relay.hpp"

namespace trillion::app {

struct BatchPaths {
  const char* command = "";  // "trillion generate", for messages
  std::string input, output;
  bool restart = false;      // overwrite the output instead of resuming it
  bool strict = false;       // a bad line stops the run before any work
};

template <class R>
struct BatchFiles {
  std::unique_ptr<JsonlWriter> out;
  std::vector<const R*> runnable;  // the good requests without a result yet, in file order
  int64_t total = 0;                // lines of the file
  int64_t skipped = 0;              // answered by an earlier run
  int64_t errors = 0;               // bad lines (their records written)
  int64_t failed = 0;               // requests that failed while running (error records)
  std::string write_error;          // the first failed write of a result (a full disk)
  // The "requests" object of --metrics, with `done` finished this run.
  nlohmann::json requests_json(int64_t done) const;
  // Writes a result unless a write has failed. A failure (the file is cut
  // back to its last complete record) is kept in write_error, not thrown:
  // the run then stops between steps like on SIGTERM, which ends every rank
  // cleanly, rather than aborting mid-step.
  void write(const nlohmann::json& record);
  // After a run that stopped early (a signal, or write_error): prints what
  // the output holds and how to resume; returns the exit code (1 after a
  // failed write, 128 + the signal after a stop).
  int end_early(const BatchPaths& paths, StopRelay::Stop stop) const;
};

// Takes the parsed lines of paths.input (checked as far as the command can):
// marks duplicate ids, applies --strict (InputError naming the first bad
// line), drops what the output already answers and opens it for appending.
template <class R>
BatchFiles<R> open_batch(std::vector<Parsed<R>>& parsed, const BatchPaths& paths);

// The result file of a batch command. Without `restart`, the records of an
// earlier run are kept (a torn last line cut, reported on stderr) and the
// run appends; with it, the file is started afresh.
FinishedResults prepare_output(const std::string& path, bool restart, const char* command);

}  // namespace trillion::app
