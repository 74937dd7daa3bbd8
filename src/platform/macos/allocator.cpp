// macOS's malloc (libmalloc's magazine zones) has no mmap or trim threshold
// to raise: large blocks come from the VM system and are reused through its
// own caches. Not measured on a Mac: if steps there fault their activations
// in again, this is where a setting would go.
#include "platform/allocator.hpp"

namespace trillion::platform {

void configure_allocator() {}

}  // namespace trillion::platform
