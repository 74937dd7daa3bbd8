# trillion_library(NAME SOURCES ... DEPS ...): one static library per src/ folder.
function(trillion_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_compile_definitions(${name} PUBLIC OMPI_SKIP_MPICXX=1)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS} PRIVATE trillion_warnings trillion_sanitize trillion_arch)
endfunction()

# trillion_test(NAME SOURCES ... DEPS ... LABELS ... [MPI_RANKS n]): a Boost.Test
# executable registered with CTest; with MPI_RANKS it runs under mpiexec.
function(trillion_test name)
  cmake_parse_arguments(ARG "" "MPI_RANKS;TIMEOUT" "SOURCES;DEPS;LABELS;ARGS" ${ARGN})
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
