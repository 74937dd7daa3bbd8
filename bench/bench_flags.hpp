// bench_model's flag values: each checked as it is read, with an error that
// names the flag and the value (a bench run wrongly given is a wasted half
// hour on this machine).
#pragma once
#include <stdexcept>
#include <string>
#include <vector>

namespace trillion::bench {

// A whole number >= lo for `flag`, or an error that names the flag and the value.
inline int whole_at_least(const std::string& flag, const std::string& v, int lo) {
  size_t used = 0;
  int x = 0;
  try {
    x = std::stoi(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != v.size() || x < lo)
    throw std::runtime_error(flag + " '" + v + "': expected a whole number >= " + std::to_string(lo));
  return x;
}

inline double positive_number(const std::string& flag, const std::string& v) {
  size_t used = 0;
  double x = 0;
  try {
    x = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != v.size() || !(x > 0))
    throw std::runtime_error(flag + " '" + v + "': expected a number > 0");
  return x;
}

// "1,4,16": whole numbers >= 1, comma-separated.
inline std::vector<int> parse_list(const std::string& flag, const std::string& s) {
  std::vector<int> v;
  for (size_t i = 0; i <= s.size();) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    v.push_back(whole_at_least(flag, s.substr(i, j - i), 1));
    i = j + 1;
  }
  return v;
}

}  // namespace trillion::bench
