#include "platform/verbs_library.hpp"

namespace trillion::platform {

const char* default_verbs_library() { return "libibverbs.so.1"; }

}  // namespace trillion::platform
