#include "common/fault.hpp"

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string>

namespace trillion {
namespace {

struct FaultSpec {
  std::string point;  // empty: no fault armed in this process
  long countdown = 0;
};

FaultSpec read_spec() {
  FaultSpec s;
  const char* value = std::getenv("TRILLION_FAULT");
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  if (!value || (rank && std::strcmp(rank, "0") != 0)) return s;
  std::string v(value);
  const size_t colon = v.find(':');
  s.point = v.substr(0, colon);
  s.countdown = colon == std::string::npos ? 1 : std::atol(v.c_str() + colon + 1);
  return s;
}

// Only the main thread reaches fault points.
FaultSpec& spec() {
  static FaultSpec s = read_spec();
  return s;
}

}  // namespace

bool fault_armed(const char* point) { return !spec().point.empty() && spec().point == point; }

void fault_point(const char* point) {
  if (!fault_armed(point) || --spec().countdown != 0) return;
  std::raise(SIGSTOP);
}

}  // namespace trillion
