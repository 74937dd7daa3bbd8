// Progress of a long byte-moving job (conversion, verification) on stderr:
// items done / total, bytes, MB/s, ETA. On a terminal one line is redrawn
// every second; otherwise (a log file, a job scheduler) a line every 10 s.
#pragma once
#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>

namespace trillion {

class ProgressMeter {
 public:
  // out == nullptr: silent. `what` prefixes each line ("convert", "verify").
  ProgressMeter(std::ostream* out, std::string what, int64_t total_items, uint64_t total_bytes);

  void add_bytes(uint64_t n);
  void item_done();
  void finish();  // prints the final line
  double seconds() const;

 private:
  void maybe_print(bool force);
  std::ostream* out_;
  std::string what_;
  bool tty_;
  int64_t total_items_, items_ = 0;
  uint64_t total_bytes_, bytes_ = 0;
  std::chrono::steady_clock::time_point start_, last_print_;
};

}  // namespace trillion
