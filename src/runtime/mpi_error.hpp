// MPI errors as exceptions. Every communicator and window trillion creates
// uses MPI_ERRORS_RETURN, and every MPI call's return code goes through
// mpi_check(), so a failing call becomes an exception naming the call and
// MPI's own explanation instead of Open MPI's default abort without context.
#pragma once
#include <string>
#include <string_view>

#include "common/error.hpp"

namespace trillion {

// An MPI call returned an error code.
struct MpiError : Error {
  MpiError(std::string_view call, int code);
  int code;
};

// An error raised by check_all(): every rank throws the same CollectiveError
// with the failing rank's message, so the job can end cleanly everywhere.
struct CollectiveError : Error {
  using Error::Error;
};

// Throws MpiError(call, rc) unless rc == MPI_SUCCESS.
void mpi_check(int rc, std::string_view call);

// MPI_Error_string of an error code ("MPI_ERR_WIN: invalid window").
std::string mpi_error_string(int code);

}  // namespace trillion
