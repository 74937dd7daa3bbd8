// The RDMA verbs library tb5's verbs backend opens at run time (dlopen) when
// none is named: each operating system ships its own.
#pragma once

namespace trillion::platform {

// Linux: rdma-core's libibverbs.so.1; macOS (26.2 and later, RDMA over
// Thunderbolt): librdma.dylib.
const char* default_verbs_library();

}  // namespace trillion::platform
