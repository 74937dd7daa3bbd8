# The macOS build check (tools/check-macos.sh; README, "macOS"), with
# -DTRILLION_MACOS_CHECK=ON and cmake/toolchains/aarch64-macos-zig.cmake:
# every translation unit compiles for arm64 macOS, and every program and
# shared library that needs no third-party library links against libSystem
# and libc++.
#
# Third-party libraries are the headers tools/check-macos.sh staged from
# Debian 13 in TRILLION_MACOS_STAGE, as targets of the names find_package
# gives on a Mac, so the CMakeLists take the same paths as there. MPI, HDF5
# and Boost.Program_options have no macOS library here: their targets are
# headers marked TRILLION_NOT_LINKED, and what links one is compiled but not
# linked (trillion_macos_check_links). PCRE2 and xxHash were built for the
# target by the script and come through pkg-config as Homebrew's do;
# nlohmann-json is headers only; Boost.Test is built from its header-only
# form. What uses only those links.
if(NOT CMAKE_SYSTEM_NAME STREQUAL "Darwin")
  message(FATAL_ERROR "TRILLION_MACOS_CHECK: configure with -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-macos-zig.cmake"
                      " (tools/check-macos.sh does)")
endif()
set(TRILLION_MACOS_OMPI_INCLUDE ${TRILLION_MACOS_STAGE}/usr/lib/aarch64-linux-gnu/openmpi/include)
if(NOT EXISTS ${TRILLION_MACOS_OMPI_INCLUDE}/mpi.h)
  message(FATAL_ERROR "TRILLION_MACOS_CHECK: no staged mpi.h in ${TRILLION_MACOS_OMPI_INCLUDE} (tools/check-macos.sh stages it)")
endif()

# trillion_macos_stand_in(NAME INCLUDES dirs... [LINKS targets...] [NOT_LINKED]):
# the target NAME as headers only; NOT_LINKED: no library behind it here.
function(trillion_macos_stand_in name)
  cmake_parse_arguments(ARG "NOT_LINKED" "" "INCLUDES;LINKS" ${ARGN})
  add_library(${name} INTERFACE IMPORTED GLOBAL)
  set_target_properties(${name} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${ARG_INCLUDES}"
                                           INTERFACE_LINK_LIBRARIES "${ARG_LINKS}")
  if(ARG_NOT_LINKED)
    set_target_properties(${name} PROPERTIES TRILLION_NOT_LINKED ON)
  endif()
endfunction()

trillion_macos_stand_in(MPI::MPI_C INCLUDES ${TRILLION_MACOS_OMPI_INCLUDE} NOT_LINKED)
trillion_macos_stand_in(HDF5::HDF5 INCLUDES ${TRILLION_MACOS_STAGE}/usr/include/hdf5/openmpi LINKS MPI::MPI_C NOT_LINKED)
trillion_macos_stand_in(Boost::headers INCLUDES ${TRILLION_MACOS_STAGE}/usr/include)
trillion_macos_stand_in(Boost::program_options LINKS Boost::headers NOT_LINKED)
# Boost.Test's library, from its header-only form, with the init API of its
# shared library (the tests define BOOST_TEST_DYN_LINK).
add_library(trillion_boost_test STATIC ${PROJECT_SOURCE_DIR}/tools/macos/boost_test_included.cpp)
target_link_libraries(trillion_boost_test PUBLIC Boost::headers)
add_library(Boost::unit_test_framework ALIAS trillion_boost_test)
set(MPI_C_INCLUDE_DIRS ${TRILLION_MACOS_OMPI_INCLUDE})
set(MPIEXEC_EXECUTABLE mpiexec)  # named by test commands; nothing runs here

# The targets (with their sources) in `dir` and below.
function(trillion_macos_targets dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    trillion_macos_targets(${sub} more)
    list(APPEND targets ${more})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# What `target` cannot link here: the NOT_LINKED targets it reaches through
# its link libraries, and libFuzzer, which zig does not ship (nor Apple's
# clang); "" when it links.
function(trillion_macos_missing target out)
  set(queue ${target})
  set(seen "")
  set(missing "")
  get_target_property(options ${target} LINK_OPTIONS)
  if(options MATCHES "-fsanitize=fuzzer")
    list(APPEND missing libFuzzer)
  endif()
  while(queue)
    list(POP_FRONT queue t)
    get_target_property(aliased ${t} ALIASED_TARGET)
    if(aliased)
      set(t ${aliased})
    endif()
    if(t IN_LIST seen)
      continue()
    endif()
    list(APPEND seen ${t})
    get_target_property(not_linked ${t} TRILLION_NOT_LINKED)
    if(not_linked)
      list(APPEND missing ${t})
    endif()
    get_target_property(imported ${t} IMPORTED)
    set(deps "")
    if(NOT imported)
      get_target_property(deps ${t} LINK_LIBRARIES)
    endif()
    get_target_property(interface ${t} INTERFACE_LINK_LIBRARIES)
    foreach(dep IN LISTS deps interface)
      string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" dep "${dep}")
      if(TARGET "${dep}")
        list(APPEND queue ${dep})
      endif()
    endforeach()
  endwhile()
  set(${out} ${missing} PARENT_SCOPE)
endfunction()

# After every target exists: what needs a missing library gets a link step
# that writes a note instead (tools/macos/compile-only), the rest links for
# real; ${CMAKE_BINARY_DIR}/macos-check-targets.txt lists which is which for
# the script (`linked NAME FILE` / `compiled NAME MISSING`).
function(trillion_macos_check_links)
  trillion_macos_targets(${PROJECT_SOURCE_DIR} targets)
  set(lines "")
  foreach(t IN LISTS targets)
    get_target_property(type ${t} TYPE)
    if(NOT type MATCHES "^(EXECUTABLE|SHARED_LIBRARY|MODULE_LIBRARY)$")
      continue()
    endif()
    trillion_macos_missing(${t} missing)
    if(missing)
      list(JOIN missing "," why)
      set_property(TARGET ${t} PROPERTY RULE_LAUNCH_LINK "${PROJECT_SOURCE_DIR}/tools/macos/compile-only ${why} --")
      string(APPEND lines "compiled ${t} ${why}\n")
    else()
      string(APPEND lines "linked ${t} $<TARGET_FILE:${t}>\n")
    endif()
  endforeach()
  file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/macos-check-targets.txt CONTENT "${lines}")
endfunction()

# Translation units no target of the Mac build holds, compiled here so the
# check covers them: the stand-ins for a missing verbs.h (tb5) and for a
# missing NEON (the kernels on other ISAs), and the MPI programs of the tb5
# tests, which tests/transport builds only beside the BTL plugin.
function(trillion_macos_check_extras)
  set(sources ${PROJECT_SOURCE_DIR}/src/kernels/generic/no_neon.cpp)
  if(TB5_HAVE_VERBS_H)
    list(APPEND sources ${PROJECT_SOURCE_DIR}/src/transport/tb5/verbs/verbs_absent.cpp)
  endif()
  add_library(trillion_macos_alternatives OBJECT ${sources})
  target_link_libraries(trillion_macos_alternatives PRIVATE trillion_kernels trillion_tb5 trillion_warnings)
  foreach(program test_tb5_mpi tb5_stall_demo)
    if(NOT TARGET ${program})
      add_library(trillion_macos_${program} OBJECT ${PROJECT_SOURCE_DIR}/tests/transport/${program}.cpp)
      target_compile_definitions(trillion_macos_${program} PRIVATE BOOST_TEST_DYN_LINK OMPI_SKIP_MPICXX=1)
      target_link_libraries(trillion_macos_${program} PRIVATE MPI::MPI_C Boost::headers trillion_warnings)
    endif()
  endforeach()
endfunction()

# The tb5 BTL plugin (src/transport/tb5/btl: C against Open MPI's internal
# headers), a step of its own (tools/check-macos.sh step 5, target
# trillion_macos_tb5_btl, outside `all`): compiled, never linked (no
# libopen-pal for macOS here), against Open MPI 5's BTL interface. Headers: Debian 13's Open MPI 5.0.7 internals, then what they
# lack (opal/mca/threads/pthreads, the timer component's) from that
# release's source, then hwloc's, PMIx's and libevent's, all as the script
# stages them. Their opal_config.h was configured for Linux (aarch64): this
# checks the plugin against Open MPI 5's API and the Mac's C library, not
# against the ABI of Homebrew's build (README, "macOS").
option(TRILLION_TB5_BTL_OMPI5 "The macOS check compiles the tb5 BTL against Open MPI 5's headers (step 5)" ON)
function(trillion_macos_check_btl)
  if(NOT TRILLION_TB5_BTL_OMPI5)
    return()
  endif()
  set(btl ${TRILLION_MACOS_STAGE}/btl)  # filled by the script's step 5, before it builds this
  file(GLOB sources ${PROJECT_SOURCE_DIR}/src/transport/tb5/btl/*.c)
  add_library(trillion_macos_tb5_btl OBJECT EXCLUDE_FROM_ALL ${sources})
  target_include_directories(trillion_macos_tb5_btl SYSTEM PRIVATE ${TRILLION_MACOS_OMPI_INCLUDE}/openmpi
    ${btl}/usr/include ${btl}/usr/include/aarch64-linux-gnu ${btl}/usr/lib/aarch64-linux-gnu/pmix2/include)
  target_include_directories(trillion_macos_tb5_btl PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(trillion_macos_tb5_btl PRIVATE -idirafter ${btl}/ompi-source -Wall -Wextra
    -Wno-unused-parameter -Wno-sign-compare -Wno-missing-field-initializers)
  set_target_properties(trillion_macos_tb5_btl PROPERTIES C_VISIBILITY_PRESET hidden)
endfunction()
