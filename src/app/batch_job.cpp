#include "app/batch_job.hpp"

#include <cstdio>

namespace trillion::app {

template <class R>
BatchJob<R>::BatchJob(Cluster& cluster, const BatchPaths& paths, std::vector<Parsed<R>>& parsed)
    : cluster_(cluster),
      paths_(paths),
      files_(open_batch(parsed, paths)),
      progress_(paths.command, int64_t(files_.runnable.size())),
      figures_([this] { return nlohmann::json{{"requests", requests_json()}}; }) {}

template <class R>
void BatchJob<R>::finished(const R& request, const std::string& failure, const nlohmann::json& record,
                           int64_t tokens) {
  if (!failure.empty()) {
    ++files_.failed;
    std::fprintf(stderr, "%s: request \"%s\" (line %lld) failed: %s\n", paths_.command, request.id.c_str(),
                 (long long)request.line, failure.c_str());
  }
  files_.write(record);
  ++done_;
  progress_.request_done(tokens);
}

template <class R>
bool BatchJob<R>::complete(bool completed) {
  progress_.finish();
  if (completed && files_.write_error.empty()) return true;  // the last write too may fail
  cluster_.end_early(files_.end_early(paths_, cluster_.stop_requested()));
  return false;
}

template class BatchJob<ScoreRequest>;
template class BatchJob<GenerateRequest>;

}  // namespace trillion::app
