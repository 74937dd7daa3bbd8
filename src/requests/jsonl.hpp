// Line-oriented JSON files: requests in, results out.
#pragma once
#include <cstdint>
#include <cstdio>
#include <sys/types.h>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace trillion {

// One non-blank line of a JSONL file, with its 1-based line number.
struct JsonlLine {
  int64_t number = 0;
  std::string text;
};

// Reads every non-blank line (CRLF tolerated). Throws InputError if the file
// cannot be read.
std::vector<JsonlLine> read_jsonl_lines(const std::string& path);

// Appends one JSON object per line, each in the file as soon as write()
// returns, so a result is on disk as soon as its request finishes. A write
// that fails (full disk, file size limit, I/O error) cuts the file back to
// the end of the last complete record and throws SystemError naming the file
// and the cause ("No space left on device"): never a torn record.
class JsonlWriter {
 public:
  JsonlWriter(const std::string& path, bool append);
  ~JsonlWriter();
  JsonlWriter(const JsonlWriter&) = delete;
  JsonlWriter& operator=(const JsonlWriter&) = delete;
  void write(const nlohmann::json& record);
  const std::string& path() const { return path_; }
  int64_t records() const { return records_; }  // written by this writer

 private:
  std::string path_;
  int fd_ = -1;
  off_t size_ = 0;  // the file's length: the end of the last complete record
  int64_t records_ = 0;
};

}  // namespace trillion
