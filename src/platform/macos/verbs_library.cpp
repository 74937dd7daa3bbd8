#include "platform/verbs_library.hpp"

namespace trillion::platform {

const char* default_verbs_library() { return "librdma.dylib"; }

}  // namespace trillion::platform
