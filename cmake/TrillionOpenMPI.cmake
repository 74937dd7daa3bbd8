# Which Open MPI the build uses, and the mpiexec arguments that depend on it.
# Open MPI 4.1 (Debian 12, Ubuntu 24.04) and 5.0 (Debian 13, Homebrew) take
# different MCA settings for the same intent. RMA over TCP: 4.1 needs
# osc/pt2pt (osc/rdma fails at MPI_Win_allocate over btl/tcp); 5.0 has no
# pt2pt, and osc/rdma drives btl/tcp (and btl/tb5) through its
# active-message RDMA emulation. (The launcher's names, 4.1's plm_rsh_* and
# 5.0's PRRTE plm_ssh_*, are the namespace scripts' business: they ask
# mpirun --version at run time.)
# Sets, after find_package(MPI):
#   TRILLION_OMPI_VERSION   e.g. "5.0.7" ("" if mpi.h is not Open MPI's)
#   TRILLION_OMPI_MAJOR     e.g. 5 (0 if not Open MPI)
#   TRILLION_OMPI_PKGLIBDIR Open MPI's own component directory (ompi_info)
#   TRILLION_OSC_OVER_BTL   the osc component that runs windows over a
#                           send/receive BTL: "pt2pt" (4.1) or "rdma" (5.0)
#   TRILLION_MPI_TCP_ARGS   mpiexec arguments for RMA over TCP loopback (a list)

set(TRILLION_OMPI_VERSION "")
set(TRILLION_OMPI_MAJOR 0)
set(_ompi_mpi_h "")
foreach(dir ${MPI_C_HEADER_DIR} ${MPI_C_INCLUDE_DIRS})
  if(NOT _ompi_mpi_h AND EXISTS "${dir}/mpi.h")
    set(_ompi_mpi_h "${dir}/mpi.h")
  endif()
endforeach()
if(_ompi_mpi_h)
  file(STRINGS "${_ompi_mpi_h}" _ompi_lines REGEX "^#define OMPI_(MAJOR|MINOR|RELEASE)_VERSION ")
  foreach(part MAJOR MINOR RELEASE)
    string(REGEX MATCH "OMPI_${part}_VERSION ([0-9]+)" _m "${_ompi_lines}")
    set(_ompi_${part} "${CMAKE_MATCH_1}")
  endforeach()
  if(NOT _ompi_MAJOR STREQUAL "")
    set(TRILLION_OMPI_VERSION "${_ompi_MAJOR}.${_ompi_MINOR}.${_ompi_RELEASE}")
    set(TRILLION_OMPI_MAJOR ${_ompi_MAJOR})
  endif()
endif()

set(TRILLION_OMPI_PKGLIBDIR "")
if(TRILLION_OMPI_VERSION)
  get_filename_component(_ompi_bindir "${MPIEXEC_EXECUTABLE}" DIRECTORY)
  find_program(TRILLION_OMPI_INFO ompi_info HINTS ${_ompi_bindir})
  if(TRILLION_OMPI_INFO)
    execute_process(COMMAND ${TRILLION_OMPI_INFO} --path pkglibdir OUTPUT_VARIABLE _ompi_out
                    ERROR_QUIET RESULT_VARIABLE _ompi_rc)
    if(_ompi_rc EQUAL 0 AND _ompi_out MATCHES "Pkglibdir: *([^\n]+)")
      string(STRIP "${CMAKE_MATCH_1}" TRILLION_OMPI_PKGLIBDIR)
    endif()
  endif()
  message(STATUS "Open MPI ${TRILLION_OMPI_VERSION} (components in ${TRILLION_OMPI_PKGLIBDIR})")
endif()

if(TRILLION_OMPI_MAJOR GREATER_EQUAL 5)
  set(TRILLION_OSC_OVER_BTL rdma)
else()
  set(TRILLION_OSC_OVER_BTL pt2pt)
endif()
set(TRILLION_MPI_TCP_ARGS --mca btl self,tcp --mca osc ${TRILLION_OSC_OVER_BTL} --mca btl_tcp_if_include lo)

# The environment of the MPI tests: root is allowed (CI), and more ranks than
# cores, which Open MPI 4.1 reads from OMPI_MCA_rmaps_base_oversubscribe and
# 5.0's PRRTE from its default mapping policy (each ignores the other's).
set(TRILLION_MPI_TEST_ENV "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
list(APPEND TRILLION_MPI_TEST_ENV "OMPI_MCA_rmaps_base_oversubscribe=1"
     "PRTE_MCA_rmaps_default_mapping_policy=:oversubscribe")
