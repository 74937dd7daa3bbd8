#include "runtime/mpi_transport.hpp"

#include <mpi.h>

#include <vector>

namespace trillion {

std::map<std::string, std::string> mpi_control_variables(const std::initializer_list<const char*>& names) {
  std::map<std::string, std::string> out;
  int provided = 0;
  if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return out;
  for (const char* name : names) {
    int index = -1;
    if (MPI_T_cvar_get_index(name, &index) != MPI_SUCCESS) continue;  // e.g. no tb5 plugin loaded
    MPI_T_cvar_handle h;
    int count = 0;
    if (MPI_T_cvar_handle_alloc(index, nullptr, &h, &count) != MPI_SUCCESS) continue;
    std::vector<char> value(size_t(count > 0 ? count : 0) + 4096, '\0');
    if (MPI_T_cvar_read(h, value.data()) == MPI_SUCCESS) out[name] = value.data();
    MPI_T_cvar_handle_free(&h);
  }
  MPI_T_finalize();
  return out;
}

}  // namespace trillion
