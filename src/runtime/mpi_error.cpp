#include "runtime/mpi_error.hpp"

#include <mpi.h>

namespace trillion {

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, size_t(len));
}

MpiError::MpiError(std::string_view call, int code_)
    : Error(std::string(call) + " failed: " + mpi_error_string(code_)), code(code_) {}

void mpi_check(int rc, std::string_view call) {
  if (rc != MPI_SUCCESS) throw MpiError(call, rc);
}

}  // namespace trillion
