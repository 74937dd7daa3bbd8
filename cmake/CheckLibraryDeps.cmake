# Each library declares every folder it includes (issue 47): run as the test
# `library_deps` (tests/docs/CMakeLists.txt) with -DDEPS=<the file
# trillion_library_deps wrote at configure time> and -DROOT=<the source tree>.
#
# For each src/ folder that is a trillion_library, every `#include "X/..."`
# of its files (any depth, headers too) where X is another folder of src/
# must name X's library in the folder's own DEPS. The rule is direct, not
# transitive: a library that reaches X only through another library's DEPS
# fails too, so a folder's CMakeLists lists everything its code uses, and
# dropping a dependency from one library cannot silently take it from another.
# Includes of folders that are not trillion libraries (<opal/...>, Boost) are
# not counted.
cmake_minimum_required(VERSION 3.20)
if(NOT DEPS OR NOT EXISTS "${DEPS}" OR NOT ROOT)
  message(FATAL_ERROR "CheckLibraryDeps: give -DDEPS=<build>/library_deps.txt (written when CMake configures) "
                      "and -DROOT=<the source tree>")
endif()
file(STRINGS "${DEPS}" entries)
set(folders "")
foreach(entry IN LISTS entries)
  string(REPLACE "|" ";" parts "${entry}")
  list(GET parts 0 lib)
  list(GET parts 1 folder)
  list(APPEND folders ${folder})
  set(library_of_${folder} ${lib})
endforeach()

set(missing 0)
set(checked 0)
foreach(entry IN LISTS entries)
  string(REPLACE "|" ";" parts "${entry}")
  list(LENGTH parts n)
  list(GET parts 0 lib)
  list(GET parts 1 folder)
  list(GET parts 2 dir)
  set(deps "")
  if(n GREATER 3)
    list(SUBLIST parts 3 -1 deps)
  endif()
  file(GLOB_RECURSE files "${dir}/*.c" "${dir}/*.cpp" "${dir}/*.h" "${dir}/*.hpp")
  list(SORT files)
  foreach(f IN LISTS files)
    file(STRINGS "${f}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"[a-z0-9_]+/")
    foreach(line IN LISTS lines)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([a-z0-9_]+)/.*" "\\1" used "${line}")
      if(used STREQUAL folder OR NOT used IN_LIST folders)
        continue()
      endif()
      math(EXPR checked "${checked} + 1")
      if(NOT used IN_LIST deps)
        file(RELATIVE_PATH rel "${ROOT}" "${f}")
        string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*" "\\1" header "${line}")
        message("${rel} includes ${header}: ${lib} does not declare ${library_of_${used}} (DEPS in src/${folder})")
        math(EXPR missing "${missing} + 1")
      endif()
    endforeach()
  endforeach()
endforeach()
list(LENGTH entries libraries)
if(missing GREATER 0)
  message(FATAL_ERROR "${missing} of the ${checked} includes of another folder name a library that the "
                      "including one does not declare")
endif()
message("${libraries} libraries: all ${checked} includes of another folder are of a declared library")
