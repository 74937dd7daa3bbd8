# trillion_library(NAME SOURCES ... DEPS ...): one static library per src/ folder.
function(trillion_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_compile_definitions(${name} PUBLIC OMPI_SKIP_MPICXX=1)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS} PRIVATE trillion_warnings trillion_sanitize trillion_arch)
  set_property(GLOBAL APPEND PROPERTY TRILLION_LIBRARIES ${name})
endfunction()

# trillion_library_deps(FILE): writes, for every trillion_library, the src/
# folder it is (its first folder below src/: transport for src/transport/tb5)
# and the folders of the trillion libraries it declares (its own DEPS, not
# theirs), one line each: "library|folder|source dir|dep folder;dep folder;...".
# cmake/CheckLibraryDeps.cmake holds each folder's #includes against it.
function(trillion_library_deps file)
  get_property(libraries GLOBAL PROPERTY TRILLION_LIBRARIES)
  foreach(lib IN LISTS libraries)
    get_target_property(dir ${lib} SOURCE_DIR)
    file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR}/src ${dir})
    string(REGEX REPLACE "/.*" "" folder "${rel}")
    set(folder_of_${lib} ${folder})
    set(dir_of_${lib} ${dir})
  endforeach()
  set(text "")
  foreach(lib IN LISTS libraries)
    get_target_property(links ${lib} LINK_LIBRARIES)
    set(deps "")
    foreach(dep IN LISTS links)
      if(DEFINED folder_of_${dep})
        list(APPEND deps ${folder_of_${dep}})
      endif()
    endforeach()
    string(APPEND text "${lib}|${folder_of_${lib}}|${dir_of_${lib}}|${deps}\n")
  endforeach()
  file(WRITE ${file} "${text}")
endfunction()

# trillion_test(NAME SOURCES ... DEPS ... LABELS ... [MPI_RANKS n]): a Boost.Test
# executable registered with CTest; with MPI_RANKS it runs under mpiexec.
function(trillion_test name)
  cmake_parse_arguments(ARG "" "MPI_RANKS;TIMEOUT" "SOURCES;DEPS;LABELS;ARGS" ${ARGN})
  trillion_private_tmpdirs()
  add_executable(${name} ${ARG_SOURCES})
  target_compile_definitions(${name} PRIVATE BOOST_TEST_DYN_LINK)
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} Boost::unit_test_framework
                        trillion_warnings trillion_sanitize trillion_arch)
  if(ARG_MPI_RANKS)
    add_test(NAME ${name} COMMAND ${MPIEXEC_EXECUTABLE} -n ${ARG_MPI_RANKS} --oversubscribe
             $<TARGET_FILE:${name}> ${ARG_ARGS})
    set_tests_properties(${name} PROPERTIES ENVIRONMENT
      "${TRILLION_MPI_TEST_ENV}")
  else()
    add_test(NAME ${name} COMMAND ${name} ${ARG_ARGS})
  endif()
  if(ARG_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}")
  endif()
  if(ARG_TIMEOUT)
    set_tests_properties(${name} PROPERTIES TIMEOUT ${ARG_TIMEOUT})
  else()
    set_tests_properties(${name} PROPERTIES TIMEOUT 300)
  endif()
endfunction()

# trillion_private_tmpdirs(): every test of the calling folder runs with a
# TMPDIR of its own, <build>/tmp/<test name> (made at configure time), set at
# the end of the folder (after every test and property in it). Open MPI keeps
# its session directory under TMPDIR (4.1: ompi.<host>.<uid>, 5.0's PRRTE:
# prte.<host>.<uid>, each job a directory inside, the shared parent removed
# by whichever job leaves it empty); MPI tests run side by side shared
# /tmp's, and one job's clean-up removed it while another was making its
# own ("A call to mkdir was unable to create the desired directory" from
# orte_session_dir). With a TMPDIR per test nothing is shared: not between
# tests, not with another build's tests, not with other users of /tmp.
# trillion_test calls it; a folder that registers tests with add_test alone
# calls it itself (tests/CMakeLists.txt fails the configuration otherwise).
function(trillion_private_tmpdirs)
  get_property(done DIRECTORY PROPERTY TRILLION_PRIVATE_TMPDIRS)
  if(NOT done)
    set_property(DIRECTORY PROPERTY TRILLION_PRIVATE_TMPDIRS ON)
    cmake_language(DEFER CALL _trillion_set_private_tmpdirs)
  endif()
endfunction()

function(_trillion_set_private_tmpdirs)
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(t IN LISTS tests)
    set(dir ${CMAKE_BINARY_DIR}/tmp/${t})
    file(MAKE_DIRECTORY ${dir})
    set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT "TMPDIR=${dir}")
  endforeach()
endfunction()
