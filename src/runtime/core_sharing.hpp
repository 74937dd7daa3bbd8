// Whether the ranks on one machine share cores: what a waiting rank may do
// with its core. A rank whose core nobody else needs waits best by polling
// (spin, then sched_yield): a sleep on a VM can last ~100 us more than asked
// and now and then milliseconds (a halted vCPU), which every hop of a batch-1
// pipeline step would pay. A rank whose core another busy
// rank needs must sleep once a wait is long (Backoff).
//
// "Machine" is the running kernel (Linux's boot_id), not the host name: the
// emulated cluster's hosts are namespaces of one machine with their own host
// names (jobs/study/cluster.py), pinned to its cores, and two of them on one
// core share it whatever their names say.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace trillion {

struct CoreClaim {
  uint64_t machine = 0;              // hash of the machine's identity
  std::array<uint64_t, 16> cpus{};   // the CPUs this process may run on (bit i: CPU i), up to 1024
};

// This process: the machine identity (boot_id, else `host`) and its CPU
// affinity (all of the machine's CPUs where affinity is unknown).
CoreClaim this_process_claim(const std::string& host);

struct MachineShare {
  int ranks = 1;  // ranks on the claimant's machine, itself included
  int cores = 1;  // CPUs in the union of their affinities
  // Whether those ranks' threads outnumber the CPUs they may use.
  bool shared(int threads_per_rank) const { return int64_t(ranks) * threads_per_rank > cores; }
};

// The share of claims[rank]'s machine, from every rank's claim.
MachineShare machine_share(const std::vector<CoreClaim>& claims, int rank);

}  // namespace trillion
