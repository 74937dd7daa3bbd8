#include "requests/resume.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/error.hpp"

namespace trillion {

FinishedResults recover_results(const std::string& path) {
  FinishedResults done;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return done;
  std::string text;
  {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError(path + ": cannot open: " + std::strerror(errno));
    std::ostringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  const size_t keep = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
  if (keep < text.size()) {
    done.torn_bytes = int64_t(text.size() - keep);
    std::filesystem::resize_file(path, keep, ec);
    if (ec) throw SystemError(path + ": cannot cut the torn last line: " + ec.message());
  }
  size_t at = 0;
  int64_t number = 0;
  while (at < keep) {
    const size_t end = text.find('\n', at);
    std::string line = text.substr(at, end - at);
    at = end + 1;
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json rec;
    try {
      rec = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {  // parse_error, or out_of_range for 1e99999
    }
    if (!rec.is_object())
      throw InputError(path + " line " + std::to_string(number) +
                       ": not a result record; the output file is not from this command (use --restart to overwrite it)");
    ++done.records;
    auto err = rec.find("error");
    if (err != rec.end() && err->is_object() && err->contains("line") && (*err)["line"].is_number_integer()) {
      done.error_lines.insert((*err)["line"].get<int64_t>());
      continue;
    }
    for (const char* key : {"custom_id", "id"}) {
      auto it = rec.find(key);
      if (it == rec.end() || it->is_null()) continue;
      done.ids.insert(it->is_string() ? it->get<std::string>() : it->dump());
      break;
    }
  }
  return done;
}

}  // namespace trillion
