#include "app/run_progress.hpp"

#include <unistd.h>

#include <cstdio>

namespace trillion {

namespace {

std::string duration(double s) {
  char buf[32];
  const long t = long(s + 0.5);
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, t / 60 % 60);
  else if (t >= 60) std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%lds", t);
  return buf;
}

}  // namespace

RunProgress::RunProgress(std::string what, int64_t total, double log_every)
    : what_(std::move(what)),
      total_(total),
      log_every_(log_every),
      tty_(::isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

void RunProgress::request_done(int64_t tokens) {
  ++done_;
  tokens_ += tokens;
  print(done_ == total_);
}

void RunProgress::finish() {
  if (tty_ && done_ > 0) std::fputc('\n', stderr);
}

void RunProgress::print(bool force) {
  const auto now = std::chrono::steady_clock::now();
  if (!force && std::chrono::duration<double>(now - last_).count() < (tty_ ? 0.5 : log_every_)) return;
  last_ = now;
  const double s = std::chrono::duration<double>(now - start_).count();
  const double rate = s > 0 ? double(done_) / s : 0.0;
  const std::string eta = done_ >= total_ ? "done in " + duration(s)
                          : rate > 0      ? "ETA " + duration(double(total_ - done_) / rate)
                                          : "ETA ?";
  std::fprintf(stderr, "%s%s: %lld/%lld requests, %.1f tokens/s, %s%s", tty_ ? "\r" : "", what_.c_str(),
               (long long)done_, (long long)total_, s > 0 ? double(tokens_) / s : 0.0, eta.c_str(),
               tty_ ? "\033[K" : "\n");
  std::fflush(stderr);
}

}  // namespace trillion
