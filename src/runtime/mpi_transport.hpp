// Which transport a run uses, as Open MPI says, and what follows from it.
//  - mpi_control_variables: Open MPI's control variables (MPI_T): the BTL and
//    one-sided component selections ("btl", "osc") and, when the btl/tb5
//    plugin is loaded, the backend it opened ("udp" or "verbs"; "none" if it
//    disqualified itself). Recorded by --metrics as "transport".
//  - mpi_performance_counters: Open MPI's performance variables (MPI_T) whose
//    names start with a prefix ("btl_tb5_": the transport's frames,
//    retransmissions and injected faults). Recorded per rank by --metrics.
//  - mpi_library: the MPI library's version (MPI_Get_library_version), which
//    every host of a job must share and which decides the MCA names in force.
//  - osc_needs_target_progress: whether one-sided operations move only while
//    the target is inside MPI (MpiEnv's progress thread).
#pragma once
#include <map>
#include <string>
#include <string_view>

namespace trillion {

// Names -> values for those of `names` that exist; call between MPI_Init and
// MPI_Finalize.
std::map<std::string, std::string> mpi_control_variables(const std::initializer_list<const char*>& names);

// Name -> value of every integer performance variable whose name starts with
// `prefix` (none where MPI_T has none, e.g. no tb5 plugin loaded); call
// between MPI_Init and MPI_Finalize.
std::map<std::string, unsigned long long> mpi_performance_counters(std::string_view prefix);

struct MpiLibrary {
  std::string version;  // "Open MPI v5.0.7" (the banner up to its first comma or line end)
  int ompi_major = 0;   // 4, 5, ...; 0 when the library is not Open MPI
  int ompi_minor = 0;
};
// MPI_Get_library_version, parsed. TRILLION_TEST_MPI_LIBRARY, when set,
// replaces the banner (tests: the hosts of one job running different
// versions, emulated with an MPMD launch on one machine).
MpiLibrary mpi_library();
MpiLibrary parse_mpi_library(std::string_view banner);

// Whether an MCA selection ("", "^ucx,pt2pt", "sm,rdma") lets `component` be chosen.
bool mca_selection_allows(std::string_view selection, std::string_view component);

// Whether one-sided puts into trillion's windows (MPI_Win_allocate) can
// move only while the target is inside MPI, from what is known at
// MPI_Init: the Open MPI generation, the osc selection, and whether the
// ranks span hosts. Why, per generation:
//  - 4.1: osc/pt2pt (RMA over send/receive: btl/tcp, btl/tb5) applies a put
//    in the target's progress engine. Chosen where the selection allows it
//    and nothing better serves (osc/rdma fails over TCP).
//  - 5.0: no pt2pt; between hosts osc/rdma drives btl/tcp and btl/tb5 (no
//    hardware RDMA) through its active-message RDMA emulation, whose
//    requests the target answers from its progress engine. On one host
//    osc/sm (its priority beats osc/rdma for MPI_Win_allocate) and osc/rdma
//    map the window in shared memory, so puts are stores: no progress.
//  - another MPI, or an unknown generation: assume it is needed (the cost
//    of a progress thread that is not needed is an MPI_Iprobe per interval).
bool osc_needs_target_progress(int ompi_major, std::string_view osc_selection, bool spans_hosts);

}  // namespace trillion
