// The batch-job driver generate and score share on rank 0: a request file
// in, one result record per line out, in any order, resumable. It opens the
// files (open_batch: duplicate ids, --strict, resuming), keeps the progress
// line and the count of finished requests, records each result the same
// way (a failed request named on stderr and counted, its record written,
// a failed write kept to stop the run between steps), feeds --metrics, and
// ends the run: with the command's summary, or early (a signal, a failed
// write) with what the output holds and how to resume. A command brings its
// engine (Scheduler, Scorer), its records and its figures.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/batch_files.hpp"
#include "app/cluster.hpp"
#include "app/run_progress.hpp"

namespace trillion::app {

template <class R>
class BatchJob {
 public:
  // `parsed`: the file's lines as the command parsed and checked them.
  BatchJob(Cluster& cluster, const BatchPaths& paths, std::vector<Parsed<R>>& parsed);
  BatchJob(const BatchJob&) = delete;  // its default figures see this object
  BatchJob& operator=(const BatchJob&) = delete;

  // The good requests without a result yet, in file order.
  const std::vector<const R*>& runnable() const { return files_.runnable; }
  const char* command() const { return paths_.command; }

  // The engine's stop test, polled between steps: a signal on any rank or a
  // failed write of a result.
  bool should_stop() { return !files_.write_error.empty() || cluster_.stop_requested().signal != 0; }

  // The command's running figures, for --metrics (its "requests" object is
  // requests_json()).
  void set_figures(std::function<nlohmann::json()> figures) { figures_ = std::move(figures); }
  // Rewrites --metrics when its interval has passed (Cluster::progress_metrics).
  void progress_metrics() { cluster_.progress_metrics(figures_); }

  // One finished request: `failure` (empty when it succeeded) is named on
  // stderr and counted; its record is written; `tokens` advance the
  // progress line.
  void finished(const R& request, const std::string& failure, const nlohmann::json& record, int64_t tokens);

  // After the engine returns (`completed`: it ran every request): false when
  // the run ended early, after telling the Cluster the exit code (a failed
  // write: 1; a signal: 128 + it) and printing how to resume. Ends the
  // progress line either way.
  bool complete(bool completed);

  nlohmann::json requests_json() const { return files_.requests_json(done_); }
  int64_t done() const { return done_; }
  int64_t bad_lines() const { return files_.errors; }
  int64_t failed() const { return files_.failed; }
  int64_t lines() const { return files_.total; }

 private:
  Cluster& cluster_;
  const BatchPaths& paths_;
  BatchFiles<R> files_;
  RunProgress progress_;
  std::function<nlohmann::json()> figures_;
  int64_t done_ = 0;
};

}  // namespace trillion::app
