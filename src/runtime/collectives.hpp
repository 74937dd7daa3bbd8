// Set-up and bookkeeping collectives over an MpiEnv (two-sided MPI under the
// hood; never on the hot path, which is RmaChannel's): agree on the
// configuration, hand rank 0's input to everyone, collect metrics. Every
// rank calls each function with the same root.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/mpi_env.hpp"

namespace trillion {

// Root's bytes on every rank (any size; other ranks' input is ignored).
std::vector<std::byte> broadcast_bytes(const MpiEnv& env, std::vector<std::byte> data, int root = 0);
std::string broadcast_string(const MpiEnv& env, std::string text, int root = 0);

// Every rank's string, indexed by rank, on root (empty elsewhere).
std::vector<std::string> gather_strings(const MpiEnv& env, const std::string& mine, int root = 0);

// Element-wise reductions; all ranks pass vectors of the same length
// (checked) and all get the result.
std::vector<double> allreduce_sum(const MpiEnv& env, std::vector<double> values);
std::vector<double> allreduce_max(const MpiEnv& env, std::vector<double> values);
std::vector<int64_t> allreduce_sum(const MpiEnv& env, std::vector<int64_t> values);

}  // namespace trillion
