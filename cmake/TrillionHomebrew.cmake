# A Mac's third-party packages without hand-set paths (README, "macOS"): the
# prefix of each Homebrew formula trillion needs (`brew --prefix FORMULA`,
# /opt/homebrew/opt/FORMULA) joins CMAKE_PREFIX_PATH. From there find_package
# finds Open MPI's mpicc, hdf5-mpi's h5pcc, Boost's and nlohmann-json's CMake
# packages, and pkg_check_modules PCRE2's and xxHash's .pc files (CMake hands
# CMAKE_PREFIX_PATH to pkg-config). Nothing happens without brew; paths
# given with -DCMAKE_PREFIX_PATH come first either way.
function(trillion_homebrew_prefixes)
  find_program(TRILLION_BREW brew)
  if(NOT TRILLION_BREW)
    return()
  endif()
  set(formulae open-mpi hdf5-mpi boost nlohmann-json pcre2 xxhash)
  execute_process(COMMAND ${TRILLION_BREW} --prefix ${formulae} OUTPUT_VARIABLE prefixes
                  ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  string(REPLACE "\n" ";" prefixes "${prefixes}")
  set(missing ${formulae})
  set(found "")
  foreach(prefix IN LISTS prefixes)
    get_filename_component(formula ${prefix} NAME)
    if(IS_DIRECTORY ${prefix})
      list(APPEND found ${prefix})
      list(REMOVE_ITEM missing ${formula})
    endif()
  endforeach()
  if(missing)
    message(WARNING "Homebrew: not installed: ${missing} (brew install ${missing})")
  endif()
  message(STATUS "Homebrew prefixes: ${found}")
  set(CMAKE_PREFIX_PATH ${CMAKE_PREFIX_PATH} ${found} PARENT_SCOPE)
endfunction()
trillion_homebrew_prefixes()
