// Line-oriented JSON files: requests in, results out.
#pragma once
#include <cstdint>
#include <cstdio>
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

// Appends one JSON object per line and flushes after each, so a result is on
// disk as soon as its request finishes.
class JsonlWriter {
 public:
  JsonlWriter(const std::string& path, bool append);
  ~JsonlWriter();
  JsonlWriter(const JsonlWriter&) = delete;
  JsonlWriter& operator=(const JsonlWriter&) = delete;
  void write(const nlohmann::json& record);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace trillion
