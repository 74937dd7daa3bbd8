// Progress of a batch run on stderr: requests done / total, tokens/s, ETA.
// On a terminal one line is redrawn (at most twice a second); otherwise (a
// log file, a job scheduler) a log line every `log_every` seconds.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace trillion {

class RunProgress {
 public:
  RunProgress(std::string what, int64_t total, double log_every = 5.0);
  void request_done(int64_t tokens);  // one request finished with `tokens` tokens processed
  void finish();                      // ends the redrawn line on a terminal

 private:
  void print(bool force);
  std::string what_;
  int64_t total_, done_ = 0, tokens_ = 0;
  double log_every_;
  bool tty_;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace trillion
