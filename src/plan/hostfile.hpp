// Open MPI hostfiles ("host slots=N" lines, '#' comments): which host each
// rank lands on under mpirun's default by-slot mapping, for `trillion plan`.
#pragma once
#include <string>
#include <vector>

namespace trillion {

struct HostEntry {
  std::string name;
  int slots = 1;
  int line = 0;
};

// Throws InputError naming the file and line of anything malformed.
std::vector<HostEntry> read_hostfile(const std::string& path);

// Host of each of `ranks` ranks (fills every slot of a host before the next).
// Throws InputError when the hostfile has fewer slots than ranks.
std::vector<std::string> map_ranks(const std::vector<HostEntry>& hosts, int ranks, const std::string& path);

}  // namespace trillion
