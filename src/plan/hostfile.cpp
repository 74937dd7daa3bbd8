#include "plan/hostfile.hpp"

#include <fstream>
#include <sstream>

#include "common/error.hpp"

namespace trillion {

std::vector<HostEntry> read_hostfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot open hostfile");
  std::vector<HostEntry> hosts;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream words(line);
    std::string word;
    if (!(words >> word)) continue;
    HostEntry h{word, 1, number};
    while (words >> word) {
      const std::string where = path + ":" + std::to_string(number) + ": ";
      const auto eq = word.find('=');
      const std::string key = word.substr(0, eq);
      if (eq == std::string::npos) throw InputError(where + "expected key=value after the host name, got \"" + word + "\"");
      const std::string value = word.substr(eq + 1);
      if (key == "slots" || key == "max_slots" || key == "max-slots") {
        size_t used = 0;
        int v = 0;
        try {
          v = std::stoi(value, &used);
        } catch (const std::logic_error&) {
          used = 0;
        }
        if (used != value.size() || v < 1) throw InputError(where + key + " must be a positive integer, got \"" + value + "\"");
        if (key == "slots") h.slots = v;
      } else {
        throw InputError(where + "unknown hostfile key \"" + key + "\" (expected slots or max_slots)");
      }
    }
    hosts.push_back(h);
  }
  if (hosts.empty()) throw InputError(path + ": the hostfile names no hosts");
  return hosts;
}

std::vector<std::string> map_ranks(const std::vector<HostEntry>& hosts, int ranks, const std::string& path) {
  std::vector<std::string> out;
  for (const HostEntry& h : hosts)
    for (int s = 0; s < h.slots && int(out.size()) < ranks; ++s) out.push_back(h.name);
  if (int(out.size()) < ranks)
    throw InputError(path + ": " + std::to_string(out.size()) + " slots for " + std::to_string(ranks) +
                     " ranks (add hosts or slots=, or run fewer ranks)");
  return out;
}

}  // namespace trillion
