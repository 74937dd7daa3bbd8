#include "store/progress.hpp"

#include <unistd.h>

#include <cstdio>
#include <iostream>

namespace trillion {

namespace {

std::string duration(double s) {
  char buf[32];
  long t = long(s + 0.5);
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, t / 60 % 60);
  else if (t >= 60) std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%lds", t);
  return buf;
}

}  // namespace

ProgressMeter::ProgressMeter(std::ostream* out, std::string what, int64_t total_items, uint64_t total_bytes)
    : out_(out),
      what_(std::move(what)),
      tty_(out == &std::cerr && ::isatty(STDERR_FILENO)),
      total_items_(total_items),
      total_bytes_(total_bytes),
      start_(std::chrono::steady_clock::now()),
      last_print_(start_) {}

double ProgressMeter::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void ProgressMeter::add_bytes(uint64_t n) {
  bytes_ += n;
  maybe_print(false);
}

void ProgressMeter::item_done() {
  ++items_;
  maybe_print(false);
}

void ProgressMeter::finish() {
  maybe_print(true);
  if (out_ && tty_) *out_ << "\n" << std::flush;
}

void ProgressMeter::maybe_print(bool force) {
  if (!out_) return;
  const auto now = std::chrono::steady_clock::now();
  const double since = std::chrono::duration<double>(now - last_print_).count();
  if (!force && since < (tty_ ? 1.0 : 10.0)) return;
  last_print_ = now;
  const double s = std::chrono::duration<double>(now - start_).count();
  const double mbs = s > 0 ? double(bytes_) / 1e6 / s : 0.0;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s: %lld/%lld tensors, %.2f/%.2f GB, %.0f MB/s, %s", what_.c_str(),
                (long long)items_, (long long)total_items_, double(bytes_) / 1e9, double(total_bytes_) / 1e9, mbs,
                force ? ("done in " + duration(s)).c_str()
                      : ("ETA " + (mbs > 0 ? duration(double(total_bytes_ - bytes_) / 1e6 / mbs) : "?")).c_str());
  *out_ << (tty_ ? "\r" : "") << buf << (tty_ ? "\033[K" : "\n") << std::flush;
}

}  // namespace trillion
