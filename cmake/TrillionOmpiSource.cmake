# What an out-of-tree Open MPI 5 component (btl/tb5) needs beyond the
# installed development headers, or instead of them.
#
# Open MPI 5's installed opal_config.h names the pthreads threads component's
# headers (MCA_threads_*_include_HEADER, reached from opal/mca/btl/btl.h), but
# no 5.0 release installs them: opal/mca/threads/pthreads/Makefile.am lists
# them as sources only. They come from the source tree of the same release,
# TRILLION_OMPI_SOURCE (tools/fetch-ompi-source.sh fetches and unpacks it;
# without the variable, /usr/local/src/openmpi-<version> is looked at). Only
# the missing headers are taken from it, copied into the build tree, so that
# everything else stays the installed, configured one. Its version must be
# the installed one's (its VERSION file), since these headers define types
# Open MPI's own objects contain (opal_mutex_t holds a pthread_mutex_t).
#
# Where no development headers are installed (Homebrew), TRILLION_OMPI_SOURCE
# may instead be a release tree configured as the installed Open MPI was
# (jobs/tb5/build-openmpi.sh): its headers, generated opal_config.h
# included, are then the ones used (a configured tree is always used whole).
#
# Open MPI 5's headers also include PMIx's <pmix.h> (Debian keeps it under
# pmix2/include: pkg-config pmix), libevent's and hwloc's.
set(TRILLION_OMPI_SOURCE "$ENV{TRILLION_OMPI_SOURCE}" CACHE PATH
    "An unpacked Open MPI release tree of the installed version, for the headers Open MPI 5 does not install (tools/fetch-ompi-source.sh)")

# trillion_ompi_source_version(DIR OUT): "5.0.7" from DIR/VERSION, "" if none.
function(trillion_ompi_source_version dir out)
  set(version "")
  if(EXISTS "${dir}/VERSION")
    file(STRINGS "${dir}/VERSION" lines REGEX "^(major|minor|release)=")
    string(REGEX REPLACE ".*major=([0-9]+).*minor=([0-9]+).*release=([0-9]+).*" "\\1.\\2.\\3" version "${lines}")
  endif()
  set(${out} "${version}" PARENT_SCOPE)
endfunction()

# trillion_ompi_source_mismatch(DIR OUT): why the release tree DIR cannot
# serve the installed Open MPI (another version), "" if it can.
function(trillion_ompi_source_mismatch dir out)
  trillion_ompi_source_version("${dir}" version)
  set(${out} "" PARENT_SCOPE)
  if(NOT version STREQUAL TRILLION_OMPI_VERSION)
    set(${out} "TRILLION_OMPI_SOURCE=${dir} is Open MPI '${version}', not the installed ${TRILLION_OMPI_VERSION}"
        PARENT_SCOPE)
  endif()
endfunction()

# trillion_ompi5_btl_includes(OUT_INCLUDES OUT_WHY_NOT): include directories to
# add after TB5_OMPI_INCLUDE, or why the plugin cannot be built.
function(trillion_ompi5_btl_includes out why)
  set(includes "")
  set(installed "${TB5_OMPI_INCLUDE}")
  set(src "${TRILLION_OMPI_SOURCE}")
  if(EXISTS "${src}/opal/include/opal_config.h" OR NOT installed)
    # A configured release tree, given or needed (no installed headers): all
    # headers from it, none installed ones.
    set(installed "")
    set(TB5_OMPI_INCLUDE "" PARENT_SCOPE)
    if(NOT EXISTS "${src}/opal/include/opal_config.h")
      set(${why} "Open MPI's development headers (opal/mca/btl/btl.h) not found; jobs/tb5/build-openmpi.sh makes \
a configured openmpi-${TRILLION_OMPI_VERSION} tree for TRILLION_OMPI_SOURCE" PARENT_SCOPE)
      return()
    endif()
    trillion_ompi_source_mismatch("${src}" mismatch)
    if(mismatch)
      set(${why} "${mismatch}" PARENT_SCOPE)
      return()
    endif()
    set(includes "${src}" "${src}/opal/include")
    # Bundled dependencies, where configure used them: PMIx by its define,
    # hwloc and libevent by configure having unpacked their tarballs.
    file(STRINGS "${src}/opal/include/opal_config.h" pmix REGEX "^#define OPAL_USING_INTERNAL_PMIX 1")
    if(pmix)
      list(APPEND includes "${src}/3rd-party/openpmix/include")
    endif()
    file(GLOB dirs LIST_DIRECTORIES true "${src}/3rd-party/hwloc-*/include" "${src}/3rd-party/libevent-*")
    foreach(dir ${dirs})
      if(IS_DIRECTORY "${dir}")
        list(APPEND includes "${dir}")
      endif()
    endforeach()
    message(STATUS "tb5: Open MPI headers from the configured tree ${src}")
  endif()
  set(headers threads_pthreads.h threads_pthreads_mutex.h threads_pthreads_threads.h threads_pthreads_tsd.h)
  set(missing "")
  foreach(h ${headers})
    if(installed AND NOT EXISTS "${installed}/opal/mca/threads/pthreads/${h}")
      list(APPEND missing ${h})
    endif()
  endforeach()
  if(missing)
    set(src "${TRILLION_OMPI_SOURCE}")
    if(NOT src AND EXISTS "/usr/local/src/openmpi-${TRILLION_OMPI_VERSION}/VERSION")
      set(src "/usr/local/src/openmpi-${TRILLION_OMPI_VERSION}")
    endif()
    if(NOT src)
      set(${why} "Open MPI ${TRILLION_OMPI_VERSION} does not install opal/mca/threads/pthreads/*.h; \
run tools/fetch-ompi-source.sh (or set TRILLION_OMPI_SOURCE to an unpacked openmpi-${TRILLION_OMPI_VERSION} tree)"
          PARENT_SCOPE)
      return()
    endif()
    trillion_ompi_source_mismatch("${src}" mismatch)
    if(mismatch)
      set(${why} "${mismatch}" PARENT_SCOPE)
      return()
    endif()
    set(staged "${CMAKE_BINARY_DIR}/tb5-ompi-headers")
    foreach(h ${missing})
      configure_file("${src}/opal/mca/threads/pthreads/${h}" "${staged}/opal/mca/threads/pthreads/${h}" COPYONLY)
    endforeach()
    list(APPEND includes "${staged}")
    message(STATUS "tb5: ${missing} from ${src}")
  endif()
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(TB5_PMIX QUIET pmix)
  find_path(TB5_PMIX_INCLUDE pmix.h HINTS ${TB5_PMIX_INCLUDE_DIRS})
  if(NOT TB5_PMIX_INCLUDE)
    set(${why} "PMIx's <pmix.h>, which Open MPI 5's headers include, not found (Debian: libpmix-dev)" PARENT_SCOPE)
    return()
  endif()
  list(APPEND includes ${TB5_PMIX_INCLUDE} ${TB5_PMIX_INCLUDE_DIRS})
  list(REMOVE_DUPLICATES includes)
  set(${out} "${includes}" PARENT_SCOPE)
endfunction()
