// Overnight safety: what an earlier, interrupted run of the same command has
// already written to the result file. Results are appended and flushed one
// line at a time, so a crash leaves at most one torn (newline-less) last line;
// recovery cuts it off, and the rerun skips every request that has a record.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_set>

namespace trillion {

struct FinishedResults {
  std::unordered_set<std::string> ids;      // requests with a result ("custom_id", else "id")
  std::unordered_set<int64_t> error_lines;  // request lines with an error record ("error": {"line"})
  int64_t records = 0;                      // complete lines kept
  int64_t torn_bytes = 0;                   // bytes of a torn last line removed

  bool has(const std::string& id, int64_t line) const { return ids.count(id) || error_lines.count(line); }
};

// Reads the result file at `path` (none: nothing finished), truncating a torn
// last line. Throws InputError naming the line when a complete line is not a
// JSON object (not a result file: use --restart to overwrite it).
FinishedResults recover_results(const std::string& path);

}  // namespace trillion
