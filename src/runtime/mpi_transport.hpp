// Which transport a run used, as Open MPI's control variables say (MPI_T):
// the BTL and one-sided component selections ("btl", "osc") and, when the
// btl/tb5 plugin is loaded, the backend it opened ("udp" or "verbs"; "none"
// if it disqualified itself). Recorded by --metrics as "transport".
#pragma once
#include <map>
#include <string>

namespace trillion {

// Names -> values for those of `names` that exist; call between MPI_Init and
// MPI_Finalize.
std::map<std::string, std::string> mpi_control_variables(const std::initializer_list<const char*>& names);

}  // namespace trillion
