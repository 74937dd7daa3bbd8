#include "runtime/mpi_transport.hpp"

#include <mpi.h>

#include <vector>

namespace trillion {

std::map<std::string, std::string> mpi_control_variables(const std::initializer_list<const char*>& names) {
  std::map<std::string, std::string> out;
  int provided = 0;
  if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return out;
  int n = 0;
  MPI_T_cvar_get_num(&n);
  // Open MPI 4.1 has no MPI_T_cvar_get_index (MPI 4.0): scan by name.
  for (int i = 0; i < n && out.size() < names.size(); ++i) {
    char name[256], desc[16];
    int name_len = sizeof name, desc_len = sizeof desc, verbosity, bind, scope;
    MPI_Datatype type;
    MPI_T_enum enumtype;
    if (MPI_T_cvar_get_info(i, name, &name_len, &verbosity, &type, &enumtype, desc, &desc_len, &bind, &scope) !=
            MPI_SUCCESS ||
        type != MPI_CHAR)
      continue;
    bool wanted = false;
    for (const char* w : names) wanted |= std::string(w) == name;
    if (!wanted) continue;
    MPI_T_cvar_handle h;
    int count = 0;
    if (MPI_T_cvar_handle_alloc(i, nullptr, &h, &count) != MPI_SUCCESS) continue;
    std::vector<char> value(size_t(count > 0 ? count : 1) + 1, '\0');
    if (MPI_T_cvar_read(h, value.data()) == MPI_SUCCESS) out[name] = value.data();
    MPI_T_cvar_handle_free(&h);
  }
  MPI_T_finalize();
  return out;
}

}  // namespace trillion
