#include "requests/jsonl.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "common/error.hpp"

namespace trillion {

std::vector<JsonlLine> read_jsonl_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open: " + std::strerror(errno));
  std::vector<JsonlLine> lines;
  std::string text;
  int64_t number = 0;
  while (std::getline(in, text)) {
    ++number;
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (text.find_first_not_of(" \t") == std::string::npos) continue;
    lines.push_back({number, text});
  }
  if (in.bad()) throw InputError(path + ": read error after line " + std::to_string(number));
  return lines;
}

JsonlWriter::JsonlWriter(const std::string& path, bool append) : path_(path) {
  file_ = std::fopen(path.c_str(), append ? "ab" : "wb");
  if (!file_) throw SystemError(path + ": cannot open for writing: " + std::strerror(errno));
}

JsonlWriter::~JsonlWriter() {
  if (file_) std::fclose(file_);
}

void JsonlWriter::write(const nlohmann::json& record) {
  // Invalid UTF-8 in user-supplied strings is replaced rather than thrown on.
  std::string line = record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  line += '\n';
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0)
    throw SystemError(path_ + ": write failed: " + std::strerror(errno));
}

}  // namespace trillion
