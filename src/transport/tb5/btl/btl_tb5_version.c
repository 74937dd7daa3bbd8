/* btl/tb5: refuses to run inside an Open MPI other than the one whose
 * headers built it. Open MPI's component loader checks only its own MCA
 * interface version (2.1, the same in 4.1 and 5.0), never the BTL interface
 * (3.1 vs 3.3) or the release, so a 4.1 plugin loads into 5.0 (and the
 * reverse) and would then be handed another receive-callback ABI and other
 * struct layouts: a crash somewhere in MPI_Init, or worse. This runs first,
 * from the component's register function, and touches nothing of Open MPI's
 * until the versions are known to match:
 *   - the running library's version, from MPI_Get_library_version (found with
 *     dlsym: libmpi is libmpi.so.40 in both generations), must have this
 *     build's major.minor. Within a series the interfaces tb5 compiles
 *     against are unchanged (git diff v5.0.0..v5.0.10 and v4.1.0..v4.1.8 of
 *     btl.h, btl/base, pmix, proc.h, the class and thread headers), so a
 *     plugin built for 5.0.7 runs on 5.0.9.
 *   - the descriptor's size here must be the size the running library's
 *     class says: headers configured otherwise than the running build (e.g.
 *     --enable-debug, which adds fields to every Open MPI object) differ. */
#include "btl_tb5.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef int (*tb5_get_library_version_fn)(char* version, int* length);

static void this_host(char* out, size_t len) {
  if (gethostname(out, len) != 0) snprintf(out, len, "this host");
  out[len - 1] = '\0';
}

static void this_plugin(char* out, size_t len) {
  Dl_info info;
  if (dladdr((void*)&mca_btl_tb5_version_ok, &info) && info.dli_fname)
    snprintf(out, len, "%s", info.dli_fname);
  else
    snprintf(out, len, "mca_btl_tb5");
}

bool mca_btl_tb5_version_ok(void) {
  tb5_get_library_version_fn get =
      (tb5_get_library_version_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "MPI_Get_library_version");
  if (!get) return true; /* not an MPI process (no libmpi): nothing to compare with */
  char text[4096] = "";  /* MPI_MAX_LIBRARY_VERSION_STRING is 256 in both */
  int length = 0;
  int major = 0, minor = 0, release = 0;
  if (get(text, &length) != 0 || sscanf(text, "Open MPI v%d.%d.%d", &major, &minor, &release) < 2)
    return true; /* only Open MPI loads MCA components; an unknown banner is not a verdict */
  char host[256], plugin[1024];
  this_host(host, sizeof host);
  this_plugin(plugin, sizeof plugin);
  if (major != OPAL_MAJOR_VERSION || minor != OPAL_MINOR_VERSION) {
    fprintf(stderr,
            "btl tb5 on %s: %s was built for Open MPI %d.%d.%d, but this process runs Open MPI %d.%d.%d; "
            "rebuild the plugin against Open MPI %d.%d.%d's headers (docs/tb5.md); tb5 disabled\n",
            host, plugin, OPAL_MAJOR_VERSION, OPAL_MINOR_VERSION, OPAL_RELEASE_VERSION, major, minor, release,
            major, minor, release);
    fflush(stderr);
    return false;
  }
  /* Same series: now Open MPI's own symbols mean what this build thinks. */
  const size_t theirs = mca_btl_base_descriptor_t_class.cls_sizeof;
  if (theirs != sizeof(mca_btl_base_descriptor_t)) {
    fprintf(stderr,
            "btl tb5 on %s: %s was built against Open MPI %d.%d.%d headers configured unlike the running Open MPI "
            "%d.%d.%d (a BTL descriptor is %zu bytes here, %zu there: e.g. --enable-debug on one side only); "
            "rebuild the plugin against the headers of the Open MPI that runs it (docs/tb5.md); tb5 disabled\n",
            host, plugin, OPAL_MAJOR_VERSION, OPAL_MINOR_VERSION, OPAL_RELEASE_VERSION, major, minor, release,
            sizeof(mca_btl_base_descriptor_t), theirs);
    fflush(stderr);
    return false;
  }
  return true;
}
