#include "runtime/mpi_transport.hpp"

#include <mpi.h>

#include <cstdlib>
#include <sstream>
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

std::map<std::string, unsigned long long> mpi_performance_counters(std::string_view prefix) {
  std::map<std::string, unsigned long long> out;
  int provided = 0, num = 0;
  if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return out;
  MPI_T_pvar_session session;
  if (MPI_T_pvar_get_num(&num) != MPI_SUCCESS || MPI_T_pvar_session_create(&session) != MPI_SUCCESS) {
    MPI_T_finalize();
    return out;
  }
  for (int i = 0; i < num; ++i) {
    char name[256], desc[16];
    int name_len = sizeof name, desc_len = sizeof desc, verbosity = 0, var_class = 0, bind = 0, readonly = 0,
        continuous = 0, atomic = 0;
    MPI_Datatype type;
    MPI_T_enum enumtype;
    if (MPI_T_pvar_get_info(i, name, &name_len, &verbosity, &var_class, &type, &enumtype, desc, &desc_len, &bind,
                            &readonly, &continuous, &atomic) != MPI_SUCCESS)
      continue;  // e.g. a variable of a component closed since
    if (std::string_view(name).substr(0, prefix.size()) != prefix || bind != MPI_T_BIND_NO_OBJECT) continue;
    if (type != MPI_UNSIGNED_LONG_LONG && type != MPI_UNSIGNED_LONG && type != MPI_UNSIGNED) continue;
    MPI_T_pvar_handle h;
    int count = 0;
    if (MPI_T_pvar_handle_alloc(session, i, nullptr, &h, &count) != MPI_SUCCESS) continue;
    if (count == 1) {
      // (A variable that is not continuous counts only once started.)
      if (!continuous) MPI_T_pvar_start(session, h);
      unsigned long long ull = 0;
      unsigned long ul = 0;
      unsigned u = 0;
      void* buf = type == MPI_UNSIGNED_LONG_LONG ? static_cast<void*>(&ull)
                  : type == MPI_UNSIGNED_LONG    ? static_cast<void*>(&ul)
                                                 : static_cast<void*>(&u);
      if (MPI_T_pvar_read(session, h, buf) == MPI_SUCCESS)
        out[name] = type == MPI_UNSIGNED_LONG_LONG ? ull : type == MPI_UNSIGNED_LONG ? ul : u;
    }
    MPI_T_pvar_handle_free(session, &h);
  }
  MPI_T_pvar_session_free(&session);
  MPI_T_finalize();
  return out;
}

MpiLibrary parse_mpi_library(std::string_view banner) {
  MpiLibrary lib;
  // "Open MPI v5.0.7, package: Debian OpenMPI, ident: 5.0.7, repo rev: ..."
  lib.version = std::string(banner.substr(0, banner.find_first_of(",\n")));
  constexpr std::string_view kOpenMpi = "Open MPI v";
  if (lib.version.rfind(kOpenMpi, 0) == 0) {
    std::istringstream in(lib.version.substr(kOpenMpi.size()));
    char dot = 0;
    if (!(in >> lib.ompi_major >> dot >> lib.ompi_minor) || dot != '.') lib.ompi_major = lib.ompi_minor = 0;
  }
  return lib;
}

MpiLibrary mpi_library() {
  if (const char* test = std::getenv("TRILLION_TEST_MPI_LIBRARY")) return parse_mpi_library(test);
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  if (MPI_Get_library_version(text, &length) != MPI_SUCCESS) return {};
  return parse_mpi_library(std::string_view(text, size_t(length)));
}

bool mca_selection_allows(std::string_view selection, std::string_view component) {
  const bool exclude = !selection.empty() && selection[0] == '^';
  if (exclude) selection.remove_prefix(1);
  if (selection.empty()) return true;
  bool listed = false;
  while (!selection.empty()) {
    const size_t comma = selection.find(',');
    if (selection.substr(0, comma) == component) listed = true;
    selection.remove_prefix(comma == std::string_view::npos ? selection.size() : comma + 1);
  }
  return exclude ? !listed : listed;
}

bool osc_needs_target_progress(int ompi_major, std::string_view osc_selection, bool spans_hosts) {
  if (ompi_major == 4) return mca_selection_allows(osc_selection, "pt2pt");
  if (ompi_major == 5) return spans_hosts && mca_selection_allows(osc_selection, "rdma");
  return true;
}

}  // namespace trillion
